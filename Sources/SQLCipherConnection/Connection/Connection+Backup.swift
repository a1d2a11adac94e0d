import CSQLCipher

extension Connection {
    /// Copies this connection's `main` database into `destination`'s `main` with SQLite's online
    /// backup API, in one step: one read transaction on this connection (the one already open, if
    /// any), so the copy is one consistent snapshot. Pages are decrypted with this connection's
    /// key and encrypted with the destination's, so both must use the same cipher settings
    /// (SQLCipher supports the API only between two encrypted databases with the same settings;
    /// see `SQLCipherEngine` and ``OnlineBackup``).
    /// - Throws: ``SQLiteError`` from the destination when a step fails.
    package func backup(into destination: Connection) throws {
        guard let backup = sqlite3_backup_init(destination.handle, "main", handle, "main") else {
            throw destination.error(code: sqlite3_errcode(destination.handle), sql: nil)
        }
        let step = sqlite3_backup_step(backup, -1)
        let finish = sqlite3_backup_finish(backup)
        guard step == SQLITE_DONE else { throw destination.error(code: step == SQLITE_OK ? SQLITE_ERROR : step, sql: nil) }
        guard finish == SQLITE_OK else { throw destination.error(code: finish, sql: nil) }
    }
}
