import ArgumentParser
import EncryptedSQLite
import Foundation

/// `rekey backup`: an encrypted, verified copy of a database in a new file.
struct Backup: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write an encrypted backup of a database (current key and format) to a new file, while it is in use.",
        discussion: """
            One consistent snapshot, encrypted from its first byte, verified by opening it with the \
            current key, and linked into place only when complete (an existing file is never \
            replaced). The target must be covered by a Keys file entry (e.g. a pattern \
            `backups/*.sqlite`) whose current key is the database's, so that `rekey --all` rotates \
            backups and `rekey keys retire-check` counts them. Exit codes: \(ExitStatus.documentation)
            """)

    @Option(name: .customLong("db"), help: ArgumentHelp("The database to back up.", valueName: "path"))
    var database: String

    @Option(name: .customLong("to"), help: ArgumentHelp("The new backup file; it must not exist.", valueName: "path"))
    var target: String

    @Flag(help: "Print one JSON document instead of a line of text.")
    var json = false

    @OptionGroup var common: CommonOptions

    func run() throws {
        common.prepare()
        let keys = try common.keyList(for: database)
        let backupKeys = try common.keyList(for: target)
        guard backupKeys.currentID == keys.currentID else {
            printError("the Keys file gives \(target) the current key \"\(backupKeys.currentID)\", but \(database) is backed up under its current key \"\(keys.currentID)\"; give backups the same key list")
            throw ExitCode(ExitStatus.invalidKeys.code)
        }
        let report: BackupReport
        do {
            report = try EncryptedDatabase.backup(path: database, keys: keys, to: target, busyTimeout: common.timeout)
        } catch {
            throw fail(error)
        }
        if json {
            printJSON(BackupDocument(report))
        } else {
            Swift.print("\(database): backup written to \(target) on key \"\(report.keyID)\" (\(report.bytes) bytes, \(report.method.rawValue), verified, \(Int(report.duration.milliseconds.rounded())) ms)")
        }
    }
}

/// The `backup --json` output.
struct BackupDocument: Encodable {
    let source: String
    let path: String
    let keyID: String
    let bytes: Int64
    let method: String
    let userVersion: Int32
    let applicationID: Int32
    let milliseconds: Double

    init(_ report: BackupReport) {
        source = report.source
        path = report.path
        keyID = report.keyID
        bytes = report.bytes
        method = report.method.rawValue
        userVersion = report.userVersion
        applicationID = report.applicationID
        milliseconds = report.duration.milliseconds
    }
}
