import CipherFormats
import DurableFiles
import Foundation
import KeyConfiguration
import SQLCipherConnection

/// What ``EncryptedDatabase/backup(to:)`` made.
///
/// ```swift
/// let backup = try database.backup(to: "backups/app-2026-11-23.sqlite")
/// print(backup.keyID, backup.bytes, backup.method)   // "2026-11", 1048576, backupAPI
/// ```
public struct BackupReport: Sendable, Equatable, Codable {
    /// How the copy was made.
    public enum Method: String, Sendable, Codable {
        /// SQLite's online backup API between two keyed connections (SQLCipher 3.x, same format).
        case backupAPI
        /// `sqlcipher_export` into an attached keyed file, in one read transaction (SQLCipher 4.1
        /// and later refuse the backup API for encrypted databases; also used for a format change).
        case export
    }

    /// The database that was copied.
    public let source: String
    /// The backup file.
    public let path: String
    /// The key the backup is encrypted with (the current key of the database's key list).
    public let keyID: String
    /// The backup's size in bytes.
    public let bytes: Int64
    /// How the copy was made.
    public let method: Method
    /// `PRAGMA user_version` of the copied snapshot (kept in the backup).
    public let userVersion: Int32
    /// `PRAGMA application_id` of the copied snapshot (kept in the backup).
    public let applicationID: Int32
    /// Copy, verification and publication.
    public let duration: Duration
}

/// An online, encrypted copy of a database into a new file: the work of
/// ``EncryptedDatabase/backup(to:)``.
///
/// The copy is one consistent snapshot (one read transaction), encrypted with the current key and
/// settings from its first byte, written under a temporary name beside the target
/// (`.<name>.<8 hex>.rekey-backup`, locked while written, removed by a later backup when left by a
/// dead process), checked on a fresh connection with the current key (`quick_check`, schema, row
/// counts, `user_version`, `application_id`), flushed, and linked to the target name, which it
/// never replaces.
struct DatabaseBackup {
    let path: String
    /// The key that opens the database now.
    let sourceKey: ResolvedKey
    /// The key the backup is encrypted with.
    let targetKey: ResolvedKey
    let busyTimeout: Duration
    /// The durable file steps (the seam the rotations use; tests alter the copy through it).
    var files: FileOperations = .system
    /// Runs the copy step (``EncryptedDatabase/backup(to:)`` holds its writer around it in
    /// rollback-journal mode).
    var aroundCopy: (_ copy: () throws(EncryptedDatabaseError) -> DatabaseExport.SourceFacts) throws(EncryptedDatabaseError) -> DatabaseExport.SourceFacts = { copy throws(EncryptedDatabaseError) in
        try copy()
    }

    /// For tests, by database path (tests run in parallel): called on the backup's thread while
    /// its copy holds its snapshot (and, in rollback-journal mode, the writer). Empty in production.
    static let duringCopy = Locked<[String: @Sendable () -> Void]>([:])

    /// Which copy the linked engine supports for these keys.
    var method: BackupReport.Method {
        SQLCipherEngine.linked.backsUpEncryptedDatabases && sourceKey.material != nil && targetKey.material != nil
            && sourceKey.writesSameFormat(as: targetKey) ? .backupAPI : .export
    }

    func run(to target: String) throws(EncryptedDatabaseError) -> BackupReport {
        let report = try Telemetry.span("backup", ["db.path": path, "backup.path": target, "key": targetKey.id, "method": method.rawValue], failure: { $0.count("backup") }) { () throws(EncryptedDatabaseError) in
            try copyVerifyPublish(to: target)
        }
        Telemetry.backedUp(method: report.method.rawValue, keyID: report.keyID, bytes: report.bytes, duration: report.duration)
        return report
    }

    private func copyVerifyPublish(to target: String) throws(EncryptedDatabaseError) -> BackupReport {
        let stopwatch = Stopwatch()
        guard case .missing = DatabaseFileKind.inspect(path: target) else { throw .targetExists(path: target) }
        RotationTemporaries.removeStale(of: target)
        let file = try RotationTemporaries.create(for: target, suffix: RotationTemporaries.backupSuffix, files: files,
                                                  reported: target, operation: "creating the backup's temporary file")
        let temporary = file.temporaryPath
        defer { file.close() }
        let method = method
        let facts = try aroundCopy { () throws(EncryptedDatabaseError) in try copy(into: temporary, method: method) }
        files.written(temporary)
        let exporter = DatabaseExport(path: path, busyTimeout: busyTimeout)
        try exporter.verify(temporary, key: targetKey, against: facts, check: "PRAGMA quick_check",
                            copy: "the backup copy", outcome: "nothing was written under \(target)")
        do {
            try file.publish(as: target, replacing: false)
        } catch .targetExists {
            throw .targetExists(path: target)
        } catch {
            throw .ioFailure(path: target, operation: "publishing the backup", detail: error.description)
        }
        return BackupReport(
            source: path, path: target, keyID: targetKey.id, bytes: FileSystem.size(of: target) ?? 0, method: method,
            userVersion: facts.userVersion, applicationID: facts.applicationID, duration: stopwatch.elapsed)
    }

    /// Copies one snapshot of the database into `temporary`; returns the snapshot's facts.
    private func copy(into temporary: String, method: BackupReport.Method) throws(EncryptedDatabaseError) -> DatabaseExport.SourceFacts {
        let trial = KeyedConnections(path: path, access: .readWrite, busyTimeout: busyTimeout)
        guard let source = try trial.open(with: sourceKey) else {
            throw .verificationFailed(path: path, keyID: sourceKey.id, detail: "the key that opened the database no longer opens it (rotated by another process?); open it again and retry")
        }
        defer { source.close() }
        do {
            switch method {
            case .backupAPI:
                let destination = try KeyedConnections(path: temporary, access: .readWrite, busyTimeout: busyTimeout).connect(targetKey)
                defer { destination.close() }
                // The facts and the pages come from one read transaction on the source.
                return try source.transaction(.deferred) { source in
                    let facts = try DatabaseExport.SourceFacts(source, journalMode: source.journalMode())
                    Self.duringCopy.withLock { $0[path] }?()
                    try source.backup(into: destination)
                    return facts
                }
            case .export:
                let exporter = DatabaseExport(path: path, busyTimeout: busyTimeout)
                let walMode = (try? source.journalMode()) == "wal"
                Self.duringCopy.withLock { $0[path] }?()
                return try exporter.copy(on: source, to: targetKey, into: temporary, original: nil, walMode: walMode)
            }
        } catch {
            throw EncryptedDatabaseError.from(error, path: path, operation: "copying into the backup \(temporary)")
        }
    }
}
