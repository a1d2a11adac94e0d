import CSQLCipher

// Keying calls other than the one at open (see `init(path:access:create:sqlcipherKey:busyTimeout:)`):
// SQLCipher's rekey, and attaching a database with a key bound as a parameter. The cipher layer
// builds on these (its `CipherKey` and settings); the C calls stay here, on the one path to SQLite.

extension Connection {
    /// The outcome of `sqlite3_rekey`: its return code and the connection's message after it.
    ///
    /// SQLCipher 3.4.1 returns `SQLITE_OK` even when it changed nothing (read-only handle, I/O
    /// error, full disk, lock not obtained), so callers must verify the result on a fresh
    /// connection; the library's in-place rotation does.
    package struct RekeyOutcome {
        /// The code `sqlite3_rekey` returned.
        package let code: Int32
        /// `sqlite3_errmsg` of the connection right after the call.
        package let message: String
        /// `true` when the engine reported success (`SQLITE_OK`), which is not proof of a change.
        package var reportedSuccess: Bool { code == SQLITE_OK }
    }

    /// Rewrites every page of the main database with `key`'s bytes (`sqlite3_rekey`), in one
    /// write transaction, keeping the connection's cipher settings: the caller rekeys only between
    /// keys that write the same format. The bytes go through the C API, never into SQL text.
    /// Nothing is thrown: the engine's code and message are returned for the caller to judge.
    package func rekey(to key: any SQLCipherKey) -> RekeyOutcome {
        let code = key.withSQLCipherBytes { bytes in
            sqlite3_rekey(handle, bytes.baseAddress, Int32(bytes.count))
        }
        return RekeyOutcome(code: code, message: String(cString: sqlite3_errmsg(handle)))
    }

    /// Runs `ATTACH DATABASE ? AS schema KEY ?` with `path` and `key`'s bytes bound as parameters
    /// (an empty text key, an unencrypted database, when `key` is `nil`), so the key is never put
    /// in SQL text; the statement's copy of the key is cleared right after its step. Only the
    /// attach: the key's cipher settings for `schema` are the caller's to apply (an ATTACH without
    /// KEY may inherit the main key or write plaintext, so the key is always given explicitly).
    /// - Throws: ``SQLiteError`` when the statement cannot be prepared, a parameter cannot be
    ///   bound, or the attach fails.
    package func attachDatabase(path: String, as schema: String, key: (any SQLCipherKey)?) throws {
        let sql = "ATTACH DATABASE ? AS \(schema) KEY ?"
        #if DEBUG
        observation?.record(.prepared(sql))
        #endif
        var statement: OpaquePointer?
        var code = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard code == SQLITE_OK, let statement else { throw error(code: code, sql: sql) }
        defer { sqlite3_finalize(statement) }
        sqlite3_bind_text(statement, 1, path, -1, sqliteTransient)
        if let key {
            code = key.withSQLCipherBytes { bytes in
                sqlite3_bind_blob(statement, 2, bytes.baseAddress, Int32(bytes.count), sqliteTransient)
            }
        } else {
            code = sqlite3_bind_text(statement, 2, "", 0, sqliteTransient)
        }
        guard code == SQLITE_OK else { throw error(code: code, sql: sql) }
        code = sqlite3_step(statement)
        // Drop the statement's copy of the key before anything else runs.
        sqlite3_clear_bindings(statement)
        guard code == SQLITE_DONE else { throw error(code: code, sql: sql) }
    }
}
