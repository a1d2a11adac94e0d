import ArgumentParser
import EncryptedSQLite
import Foundation

/// `rekey keys`: the key lifecycle around rotation: make a key, find what still needs an old one.
struct Keys: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make a new key, rotate the master key, or check whether an old key can be retired.",
        subcommands: [NewKeyCommand.self, RewrapCommand.self, RetireCheck.self])
}

/// `rekey keys new`: a new random key in a new key file, appended as the current key of an entry.
struct NewKeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "new",
        abstract: "Make a 256-bit random key in a new key file (mode 0600), or wrapped by the current key-encryption key, and append it as the current key of a Keys file entry.",
        discussion: """
            The key comes from the system's random generator and goes straight into the new key \
            file (created exclusively, never overwriting a file); it is never printed. With \
            --wrapped it goes into no file: the Keys file's current key-encryption key wraps it \
            and the Keys file holds the wrapped value (wrapped_by, wrapped_key). The Keys \
            file is edited in place (its comments and layout stay) and replaced durably. Then \
            rotate with the command it prints: `rekey --keys <file> --db <database>` for one database, `rekey --keys <file> --all` otherwise. Exit codes: \(ExitStatus.documentation)
            """)

    @Option(name: .customLong("for"), help: ArgumentHelp("A database entry's path or pattern, exactly as the Keys file writes it; repeat to give several entries (such as the databases' and their backups' patterns) the same key.", valueName: "path"))
    var databases: [String] = []

    @Option(help: ArgumentHelp("The new key's id (default: today's date, YYYY-MM-DD).", valueName: "id"))
    var id: String?

    @Option(help: ArgumentHelp("The new key file (default: <id>.key beside the Keys file); it must not exist.", valueName: "path"))
    var keyFile: String?

    @Option(help: "How the key file holds the key: binary (32 bytes) or hex (64 hex digits).")
    var format: KeyFormat = .binary

    @Flag(help: "Make a wrapped data key: wrapped by the last key of key_encryption_keys, stored in the Keys file, no key file.")
    var wrapped = false

    @Flag(help: "Write no created: date.")
    var noCreated = false

    @Flag(help: "Print one JSON document instead of a line of text.")
    var json = false

    @OptionGroup var common: CommonOptions

    func validate() throws {
        if databases.isEmpty { throw ValidationError("name the Keys file entry with --for <path or pattern>") }
        if wrapped && keyFile != nil { throw ValidationError("--wrapped makes no key file: leave out --key-file") }
    }

    func run() throws {
        common.prepare()
        let key: GeneratedKey
        do {
            key = try GeneratedKey.create(keysFile: common.keysPath, databases: databases, id: id, keyFile: keyFile, format: format, wrapped: wrapped, created: noCreated ? nil : Date())
        } catch {
            printError(error.description)
            throw ExitCode(ExitStatus(error).code)
        }
        if json {
            printJSON(key)
        } else {
            let place = key.keyFile.map { "in \($0) (\(key.format?.rawValue ?? ""), mode 0600)" } ?? "wrapped in the Keys file"
            Swift.print("\(key.databases.joined(separator: ", ")): new current key \"\(key.keyID)\" \(place), added to \(key.keysFile); rotate with: \(Self.rotateCommand(keysFile: common.keysPath, databases: databases))")
        }
    }

    /// The `rekey` command that rotates what `keys new` was given, runnable from any folder:
    /// `rekey --keys <file> --db <database>` for one entry that names one file (the library resolves
    /// it as the Keys file does), `rekey --keys <file> --all` for patterns or several entries.
    static func rotateCommand(keysFile: String, databases: [String]) -> String {
        let command = "rekey --keys \(shellQuoted(keysFile))"
        guard databases.count == 1, let path = KeysFile.databasePath(ofEntry: databases[0], inKeysFileAt: keysFile) else {
            return command + " --all"
        }
        return command + " --db \(shellQuoted(path))"
    }

    /// `text` as one shell word: as is when it holds only characters the shell leaves alone, else in single quotes.
    static func shellQuoted(_ text: String) -> String {
        let plain = text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "/._-+:@%,=".contains($0)) }
        return plain && !text.isEmpty ? text : "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}

extension KeyFormat: ExpressibleByArgument {}

/// Prints `value` as one sorted, pretty JSON document on standard output.
func printJSON(_ value: some Encodable) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    if let data = try? encoder.encode(value) {
        Swift.print(String(decoding: data, as: UTF8.self))
    }
}

/// `rekey keys retire-check`: which databases and backups still need a key.
struct RetireCheck: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "retire-check",
        abstract: "List every database, and every backup matching --backups, that still needs a key; exit 0 only when none does.",
        discussion: """
            Each file is opened read-only, current key first (one attempt for a rotated file); \
            nothing is written. A file that cannot be checked, or whose current key is the one \
            being retired, also blocks. Backups must be covered by the Keys file (a pattern entry), \
            so that `rekey --all` rotates them. Exit codes: \(ExitStatus.needsRotation.code) when a \
            file still needs the key or could not be checked; otherwise as listed: \(ExitStatus.documentation)
            """)

    @Option(name: .customLong("key"), help: ArgumentHelp("The id of the key to retire.", valueName: "id"))
    var keyID: String?

    @Option(name: .customLong("kek"), help: ArgumentHelp("The id of a key-encryption key to retire: checks the Keys file's wrapped data keys only (no database is opened).", valueName: "id"))
    var keyEncryptionKeyID: String?

    @OptionGroup var selection: DatabaseOptions

    @Option(help: ArgumentHelp("A glob of backup files to check as well (quote it); repeat for several.", valueName: "pattern"))
    var backups: [String] = []

    @Option(help: ArgumentHelp("How many files to check at once.", valueName: "n"))
    var jobs: Int = 2

    @Flag(help: "Print one JSON document instead of lines of text.")
    var json = false

    @OptionGroup var common: CommonOptions

    func validate() throws {
        if (keyID == nil) == (keyEncryptionKeyID == nil) {
            throw ValidationError("give the key to retire with --key <id>, or a key-encryption key with --kek <id>")
        }
        if keyEncryptionKeyID != nil {
            if !selection.selection.isEmpty || !backups.isEmpty {
                throw ValidationError("--kek checks the Keys file only: leave out --all, --db and --backups")
            }
            return
        }
        if selection.selection.isEmpty && backups.isEmpty {
            throw ValidationError("give the databases with --all or --db <path>, and backups with --backups '<pattern>'")
        }
        if !FleetLimits.jobs.contains(jobs) {
            throw ValidationError("--jobs must be between \(FleetLimits.jobs.lowerBound) and \(FleetLimits.jobs.upperBound)")
        }
    }

    func run() throws {
        common.prepare()
        let keysFile: KeysFile
        do {
            keysFile = try KeysFile.load(path: common.keysPath)
        } catch {
            printError(error.description)
            throw ExitCode(ExitStatus(error).code)
        }
        if let keyEncryptionKeyID {
            try Self.checkKeyEncryptionKey(keyEncryptionKeyID, in: keysFile, json: json)
            return
        }
        let keyID = keyID ?? ""
        var files: [FleetDatabase] = []
        if !selection.selection.isEmpty {
            do {
                files = try selection.selection.databases(in: keysFile)
            } catch {
                printError(error.description)
                throw ExitCode(ExitStatus(error).code)
            }
        }
        let known = Set(files.map { KeysFile.canonical($0.path) })
        for pattern in backups {
            files += KeyRetirement.files(matching: pattern, in: keysFile).filter { !known.contains(KeysFile.canonical($0.path)) }
        }
        let report = KeyRetirement(keyID: keyID, databases: files, jobs: jobs, busyTimeout: common.timeout).run()
        if json {
            printJSON(report)
        } else {
            for finding in report.findings {
                Swift.print("\(finding.path): " + Self.text(finding, keyID: keyID))
            }
            let blocking = report.blocking.count
            Swift.print(report.canRetire
                ? "key \"\(keyID)\" can be retired: none of \(report.findings.count) file(s) needs it"
                : "key \"\(keyID)\" is still needed: \(blocking) of \(report.findings.count) file(s) need it or could not be checked")
        }
        if !report.canRetire { throw ExitCode(ExitStatus.needsRotation.code) }
    }

    /// `--kek`: prints which wrapped data keys the KEK still wraps; exits 3 unless none and not current.
    static func checkKeyEncryptionKey(_ id: String, in keysFile: KeysFile, json: Bool) throws {
        let check = KeyEncryptionKeyRetirement(keysFile: keysFile, keyEncryptionKeyID: id)
        if json {
            printJSON(check)
        } else {
            if !check.isListed { Swift.print("key-encryption key \"\(id)\" is not listed in key_encryption_keys") }
            for key in check.wrappedKeys {
                Swift.print("\(key.database): key \"\(key.keyID)\" is STILL WRAPPED by \"\(id)\": rewrap it (rekey keys rewrap)")
            }
            if check.isCurrent {
                Swift.print("\"\(id)\" is the CURRENT key-encryption key: add a new one and rewrap first (rekey keys rewrap --new-kek <id>)")
            }
            Swift.print(check.canRetire
                ? "key-encryption key \"\(id)\" can be retired: no wrapped data key needs it; delete its entry and destroy its material"
                : "key-encryption key \"\(id)\" is still needed")
        }
        if !check.canRetire { throw ExitCode(ExitStatus.needsRotation.code) }
    }

    static func text(_ finding: KeyRetirementFinding, keyID: String) -> String {
        switch finding.status {
        case .onOtherKey: return "on key \"\(finding.openedWithKeyID ?? "?")\""
        case .onRetiringKey: return "STILL ON \"\(keyID)\": rotate it (rekey --db \(finding.path))"
        case .retiringKeyIsCurrent: return "\"\(keyID)\" is its CURRENT key: make a new key first (rekey keys new)"
        case .unknown: return "NOT CHECKED: \(finding.problem ?? "")"
        }
    }
}
