import CSQLCipher

extension Connection {
    /// The outcome of `sqlite3_rekey`: its return code and the connection's message after it.
    ///
    /// SQLCipher 3.4.1 returns `SQLITE_OK` even when it changed nothing (read-only handle, I/O
    /// error, full disk, lock not obtained), so callers must verify the result on a fresh
    /// connection; ``InPlaceRotation`` does.
    struct RekeyOutcome {
        let code: Int32
        let message: String
        var reportedSuccess: Bool { code == SQLITE_OK }
    }

    /// Rewrites every page of the main database with `material`, in one write transaction.
    /// The key is passed through the C API, never as SQL text.
    func rekey(to material: KeyMaterial) -> RekeyOutcome {
        let code = material.withSQLCipherBytes { key in
            sqlite3_rekey(handle, key.baseAddress, Int32(key.count))
        }
        return RekeyOutcome(code: code, message: String(cString: sqlite3_errmsg(handle)))
    }
}
