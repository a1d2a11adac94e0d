import Foundation
import KeyConfiguration

extension EncryptedDatabase {
    /// Writes an encrypted backup of the database to `target`, a new file, while the app goes on
    /// using the database.
    ///
    /// The backup is one consistent snapshot (one read transaction on a connection of its own:
    /// in WAL mode writers go on meanwhile; in rollback-journal mode this process's writes wait
    /// for the copy, and another process's commit waits for it up to its busy timeout), encrypted with the current key of ``keys`` and its
    /// settings, with `user_version` and `application_id` kept. On SQLCipher 3.x it is made with
    /// SQLite's backup API; SQLCipher 4.1 and later refuse that API for encrypted databases, so
    /// there it is made with `sqlcipher_export` into an attached keyed file
    /// (``BackupReport/method``). It appears under `target` complete or not at all: written under a
    /// temporary name beside it, verified by opening it with the current key (`quick_check`,
    /// schema, row counts, `user_version`, `application_id`), flushed, linked into place (an
    /// existing file is never replaced), folder flushed. It is never written in the clear.
    ///
    /// Give backups a Keys file entry (a pattern such as `backups/*.sqlite` with the same keys),
    /// so that `rekey --all` rotates them with the databases and `rekey keys retire-check` counts
    /// them.
    ///
    /// ```swift
    /// let backup = try database.backup(to: "/var/backups/app/app-2026-11-23.sqlite")
    /// print("\(backup.bytes) bytes on key \(backup.keyID)")
    /// ```
    /// - Throws: ``EncryptedDatabaseError/targetExists(path:)`` when `target` exists; otherwise as
    ///   for opening (busy, I/O, disk full) or
    ///   ``EncryptedDatabaseError/verificationFailed(path:keyID:detail:)``. After an error
    ///   nothing is left under `target`.
    @discardableResult
    public func backup(to target: String) throws(EncryptedDatabaseError) -> BackupReport {
        try checkOpen()
        let (key, busyTimeout, files, walMode) = writer.withLock {
            (writer.key, follower.options.busyTimeout, follower.options.files, (try? writer.connection.journalMode()) == "wal")
        }
        var backup = DatabaseBackup(path: path, sourceKey: key, targetKey: keys.current, busyTimeout: busyTimeout, files: files)
        if !walMode {
            // In rollback-journal mode the copy's read lock and a commit exclude each other, and a
            // writer that commits back to back keeps the file's PENDING lock nearly all the time:
            // the copy's connection could not take its read lock within the busy timeout (SQLCipher
            // 4.6.1 CI, a thread committing in a loop). This process's writes wait for the copy on
            // the writer's lock instead, as they would at their commit.
            let writer = writer
            backup.aroundCopy = { copy throws(EncryptedDatabaseError) in
                try writer.withLock { () throws(EncryptedDatabaseError) in try copy() }
            }
        }
        return try backup.run(to: target)
    }

    /// ``backup(to:)`` for a database that is not open in this process (`rekey backup`): finds the
    /// key that opens it as ``check(path:keys:busyTimeout:)`` does, without rotating it, and writes
    /// the backup under the current key.
    /// - Throws: as ``backup(to:)``, and as for opening when no key opens the file.
    @discardableResult
    public static func backup(path: String, keys: KeyList, to target: String, busyTimeout: Duration = .seconds(5)) throws(EncryptedDatabaseError) -> BackupReport {
        guard case .missing = DatabaseFileKind.inspect(path: target) else { throw .targetExists(path: target) }
        let probe = try KeyProbe(keys: keys, trial: KeyedConnections.forInspection(path: path, busyTimeout: busyTimeout)).run()
        probe.connection.close()
        return try DatabaseBackup(path: path, sourceKey: probe.key, targetKey: keys.current, busyTimeout: busyTimeout).run(to: target)
    }
}
