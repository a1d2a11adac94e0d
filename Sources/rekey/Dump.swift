import ArgumentParser
import EncryptedSQLite
import Foundation

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
        common.prepare()
        let keys = try common.keyList(for: database)
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
