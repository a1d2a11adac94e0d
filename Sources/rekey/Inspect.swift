import ArgumentParser
import EncryptedSQLite
import Foundation

/// `rekey status`: each database's state, read-only.
struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show which key opens each database and its journal mode, page size and count, kdf_iter and size, without changing it.")

    @Option(name: .customLong("db"), help: ArgumentHelp("A database file; repeat for several.", valueName: "path"))
    var databases: [String] = []

    @Flag(help: "Every database the Keys file names.")
    var all = false

    @Flag(help: "Print one JSON document instead of lines of text.")
    var json = false

    @OptionGroup var common: CommonOptions

    func validate() throws {
        if databases.isEmpty && !all { throw ValidationError("give at least one database with --db <path>, or --all") }
    }

    func run() throws {
        common.bootstrapLogging()
        let keysFile = try common.loadKeysFile()
        let paths = databases + (all ? keysFile.allDatabasePaths().filter { !databases.contains($0) } : [])
        var states: [DatabaseState] = []
        var statuses: [ExitStatus] = []
        var errors: [[String: String]] = []
        for path in paths {
            do {
                let keys = try keysFile.keyList(forDatabase: path)
                do {
                    let state = try DatabaseInspection.state(path: path, keys: keys, busyTimeout: common.timeout)
                    states.append(state)
                    statuses.append(.success)
                    if !json { Swift.print(Self.line(state)) }
                } catch {
                    statuses.append(ExitStatus(error))
                    errors.append(["path": path, "kind": error.category.rawValue, "message": error.description])
                    if !json { FileHandle.standardError.write(Data("rekey: \(error.description)\n".utf8)) }
                }
            } catch {
                statuses.append(ExitStatus(error))
                errors.append(["path": path, "kind": "keys", "message": error.description])
                if !json { FileHandle.standardError.write(Data("rekey: \(error.description)\n".utf8)) }
            }
        }
        if json {
            struct Document: Encodable { let databases: [DatabaseState]; let errors: [[String: String]] }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            Swift.print(String(decoding: try encoder.encode(Document(databases: states, errors: errors)), as: UTF8.self))
        }
        let status = ExitStatus.overall(statuses)
        if status != .success { throw ExitCode(status.code) }
    }

    static func line(_ state: DatabaseState) -> String {
        var parts: [String] = []
        if state.plaintext {
            parts.append("unencrypted (plaintext entry \"\(state.openedWithKeyID)\")")
        } else {
            parts.append("key \"\(state.openedWithKeyID)\"" + (state.legacy ? " (legacy)" : ""))
        }
        let method = switch state.rotationMethod {
        case .export: "export"
        case .pageReencryption: "page re-encryption"
        case .inPlace, nil: "engine rekey"
        }
        parts.append(state.needsRotation ? "needs rotation to \"\(state.currentKeyID)\" (\(method))" : "current")
        parts.append("journal \(state.journalMode)")
        parts.append("\(state.pageCount) pages of \(state.pageSize) bytes")
        if let kdf = state.kdfIterations { parts.append("kdf_iter \(kdf)") }
        if let hmac = state.useHMAC { parts.append("hmac \(hmac ? "on" : "off")") }
        parts.append("\(state.bytes) bytes")
        parts.append("user_version \(state.userVersion)")
        if !state.sideFiles.isEmpty { parts.append("side files \(state.sideFiles.joined(separator: " "))") }
        return "\(state.path): " + parts.joined(separator: ", ")
    }
}

/// `rekey dump`: the database as SQL text.
struct Dump: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a database as SQL text (schema and rows, like sqlite3's .dump). The text is the content in the clear.")

    @Option(name: .customLong("db"), help: ArgumentHelp("The database file.", valueName: "path"))
    var database: String

    @Option(help: ArgumentHelp("Write to this new file (mode 0600; never overwritten) instead of standard output.", valueName: "path"))
    var out: String?

    @OptionGroup var common: CommonOptions

    func run() throws {
        common.bootstrapLogging()
        let keysFile = try common.loadKeysFile()
        let keys = try common.keyList(for: database, in: keysFile)
        var handle = FileHandle.standardOutput
        if let out {
            let descriptor = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else {
                if errno == EEXIST { throw fail(.targetExists(path: out)) }
                throw fail(.ioFailure(path: out, operation: "creating the dump file", detail: String(cString: strerror(errno))))
            }
            handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        }
        var buffer = Data()
        do {
            try DatabaseInspection.dump(path: database, keys: keys, busyTimeout: common.timeout) { line in
                buffer.append(contentsOf: line.utf8)
                buffer.append(0x0A)
                if buffer.count >= 1 << 16 { handle.write(buffer); buffer.removeAll(keepingCapacity: true) }
            }
            handle.write(buffer)
        } catch let error as EncryptedDatabaseError {
            if let out { unlink(out) }
            throw fail(error)
        }
    }
}

/// `rekey decrypt`: an unencrypted copy, only with explicit confirmation, never overwriting.
struct Decrypt: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write an UNENCRYPTED copy of a database to a new file (requires --confirm-plaintext; never overwrites).")

    @Option(name: .customLong("db"), help: ArgumentHelp("The encrypted database.", valueName: "path"))
    var database: String

    @Option(help: ArgumentHelp("The new, unencrypted file; it must not exist.", valueName: "path"))
    var out: String

    @Flag(help: "Confirm that you want the data written to disk in the clear.")
    var confirmPlaintext = false

    @OptionGroup var common: CommonOptions

    func validate() throws {
        if !confirmPlaintext {
            throw ValidationError("decrypt writes the database's content to disk in the clear; add --confirm-plaintext if that is what you want")
        }
    }

    func run() throws {
        common.bootstrapLogging()
        let keysFile = try common.loadKeysFile()
        let keys = try common.keyList(for: database, in: keysFile)
        do {
            try DatabaseInspection.decryptedCopy(path: database, keys: keys, to: out, busyTimeout: common.timeout)
        } catch {
            throw fail(error)
        }
        Swift.print("\(database): unencrypted copy written to \(out) (verified); it holds the data in the clear, delete it when done")
    }
}
