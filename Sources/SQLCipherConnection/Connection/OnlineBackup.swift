import CSQLCipher

/// SQLite's online backup API driven in steps: copies `source`'s `main` database into
/// `destination`'s `main` a few pages at a time, so that the source connection can be used
/// between steps.
///
/// Pages are decrypted with the source's key and encrypted with the destination's, so both
/// connections must use the same cipher settings (any keys): the only case SQLCipher supports
/// (Zetetic: "encrypted-to-encrypted … backups with the same encryption settings"), checked on
/// 3.4.1 and 4.6.1 by the background rotation's tests. Writes
/// made through the source connection between steps are written into the copy as they happen;
/// a write through any other connection makes the next step start the copy again.
///
/// The destination holds a write transaction from the first step until the copy is done (or
/// ``finish()`` is called). Each step reads the source in a read transaction of its own unless
/// the source connection already has one open.
package final class OnlineBackup {
    private var backup: OpaquePointer?
    private let destination: Connection

    /// Starts a copy of `source` into `destination`.
    /// - Throws: ``SQLiteError`` from the destination when SQLite refuses the pair (the
    ///   destination is in use, or the page sizes differ and cannot be changed).
    package init(from source: Connection, into destination: Connection) throws {
        guard let backup = sqlite3_backup_init(destination.handle, "main", source.handle, "main") else {
            throw destination.error(code: sqlite3_errcode(destination.handle), sql: nil)
        }
        self.backup = backup
        self.destination = destination
    }

    deinit { finish() }

    /// Copies up to `pages` more pages (all that remain when `pages` is negative).
    /// - Returns: `true` when the copy is complete (the destination's transaction is committed).
    /// - Throws: ``SQLiteError``: busy or locked (the step can be tried again), or a failure that
    ///   ends the copy.
    package func step(pages: Int32) throws -> Bool {
        guard let backup else { return true }
        let code = sqlite3_backup_step(backup, pages)
        switch code {
        case SQLITE_DONE: return true
        case SQLITE_OK: return false
        default: throw destination.error(code: code, sql: nil)
        }
    }

    /// Pages still to copy after the last step.
    package var remaining: Int { backup.map { Int(sqlite3_backup_remaining($0)) } ?? 0 }

    /// The source's size in pages at the last step.
    package var pageCount: Int { backup.map { Int(sqlite3_backup_pagecount($0)) } ?? 0 }

    /// Ends the copy and releases the destination's transaction (rolling it back unless the copy
    /// was complete). Safe to call more than once.
    /// - Returns: SQLite's result code of the finish (`SQLITE_OK` when every step succeeded).
    @discardableResult
    package func finish() -> Int32 {
        guard let backup else { return SQLITE_OK }
        self.backup = nil
        return sqlite3_backup_finish(backup)
    }
}

extension Connection {
    /// Writes every dirty page of this connection's cache to its file (`sqlite3_db_cacheflush`),
    /// without committing: for a copy that is written in steps, so that its file holds what was
    /// copied so far and can be flushed to disk outside the copy's pauses.
    /// - Throws: ``SQLiteError`` when a write fails.
    package func flushCache() throws {
        let code = sqlite3_db_cacheflush(handle)
        if code != SQLITE_OK { throw error(code: code, sql: nil) }
    }
}
