import SQLCipherConnection

/// Rotates a database in place with SQLCipher's own `sqlite3_rekey`, in one SQLite write
/// transaction, then proves the result on a fresh connection: the fallback for key-only rotations
/// that page re-encryption declines, and the strategy ``RotationStrategy/engineRekey`` asks for.
///
/// `sqlite3_rekey` can report success and change nothing (read-only handle, I/O failure, full
/// disk, lock not obtained), so this strategy checks what it can before (write access, space,
/// lock) and trusts only a fresh connection afterwards, falling back to proving that the old key
/// still opens the file.
struct EngineRekey: Rotation {
    var method: RotationMethod { .inPlace }

    func rotate(_ connection: Connection, in context: RotationContext) throws(EncryptedDatabaseError) -> RotationResult {
        guard let key = context.to.cipherKey else {
            // The plan sends every change to or from plaintext through the export path.
            return .declined(connection, reason: "the engine's rekey cannot write an unencrypted file")
        }
        let start = Stopwatch()
        defer { connection.close() }
        let bytes = context.fileSize
        try context.requireWritable(connection)
        // The journal (or WAL) grows to about the size of the database.
        try context.requireSpace(bytes: bytes, for: "the rotation's journal")
        // Wait (up to the busy timeout) until no other connection writes (or, in rollback mode,
        // reads), so that a lock conflict is reported as busy instead of as a rekey that silently
        // did nothing, and keep that lock until the rekey has committed: SQLCipher's rekey runs
        // inside the open transaction and commits it. Released between a probe and the rekey, the
        // lock let another connection in, and the rekey then did nothing (EngineRekeyLockTests).
        try context.step("locking the database for rotation") { try connection.execute("BEGIN EXCLUSIVE") }
        var locked = true
        defer { if locked, !connection.isAutocommit { try? connection.execute("ROLLBACK") } }
        // Read under the lock just taken: what the connection said before can be stale (another
        // process may have switched the file to or from WAL mode since it last read it).
        let journalMode = try context.step("reading the journal mode") { try connection.journalMode() }

        context.logger.notice("rotating database key", metadata: [
            "path": "\(context.path)", "from": "\(context.from.id)", "to": "\(context.to.id)", "journal_mode": "\(journalMode)", "bytes": "\(bytes)",
        ])
        let rekeyTime = Stopwatch()
        let outcome = connection.rekey(to: key)
        // The rekey committed (or rolled back) the database's transaction itself; this ends the
        // statement-level transaction that BEGIN opened.
        if !connection.isAutocommit { try? connection.execute("COMMIT") }
        locked = false
        if journalMode == "wal" {
            // Move the re-encrypted pages from the WAL into the database file. A checkpoint that
            // cannot finish (a reader holds an old snapshot) is not an error: the WAL is valid.
            _ = try? connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
        let rekeyDuration = rekeyTime.elapsed
        // Closing rolls back whatever SQLCipher may have left open after a swallowed failure.
        connection.close()
        guard outcome.reportedSuccess else {
            throw .rotationNotApplied(path: context.path, fromKeyID: context.from.id, toKeyID: context.to.id, detail: "sqlite3_rekey returned \(outcome.code): \(outcome.message)")
        }

        let verifyTime = Stopwatch()
        let verified = try verify(in: context, detail: outcome.message)
        let report = context.report(method: method, journalMode: journalMode, bytes: bytes, rewrite: rekeyDuration, verify: verifyTime.elapsed, since: start)
        context.logger.notice("rotated database key", metadata: [
            "path": "\(context.path)", "from": "\(context.from.id)", "to": "\(context.to.id)",
            "rekey_ms": "\(Int(rekeyDuration.milliseconds))", "verify_ms": "\(Int(report.verifyDuration.milliseconds))",
        ])
        return .rotated(verified, report)
    }

    /// Opens a fresh connection with the new key and runs the configured check. When the new key
    /// does not open the file, proves that the old key still reads every page of it (not page 1
    /// alone: ``requireStillOnOldKey(_:in:detail:)``) and reports that nothing changed.
    ///
    /// In WAL mode the fresh connections read through the WAL like any reader: a committed rekey
    /// whose checkpoint could not finish is read from the WAL's frames (page 1 among them), so
    /// the new key opens it; the new key failing means the newest committed page 1 is not on it.
    func verify(in context: RotationContext, detail: String) throws(EncryptedDatabaseError) -> Connection {
        let (path, from, to) = (context.path, context.from, context.to)
        guard let connection = try context.openFresh(with: to) else {
            guard let old = try context.openFresh(with: from) else {
                throw .verificationFailed(path: path, keyID: to.id, detail: "neither the new nor the old key opens the file after the rotation")
            }
            try requireStillOnOldKey(old, in: context, detail: detail)
            throw .rotationNotApplied(path: path, fromKeyID: from.id, toKeyID: to.id, detail: "SQLCipher reported success but the file is still on the old key (\(detail))")
        }
        guard let check = context.engineCheck(pagesReadBack: false) else { return connection }
        let problems: String?
        do {
            problems = try context.problems(running: check, on: connection)
        } catch {
            throw .verificationFailed(path: path, keyID: to.id, detail: "\(check) failed: \(error)")
        }
        if let problems { throw .verificationFailed(path: path, keyID: to.id, detail: problems) }
        return connection
    }

    /// Proves, on `connection` (fresh, keyed with the old key, which opened page 1), that every
    /// page still authenticates with the old key: `PRAGMA quick_check` reads them all. Page 1 alone
    /// says nothing about the others: a rekey that stopped part-way, or another writer, can leave
    /// later pages on another key, which readers then report as a malformed database.
    /// - Throws: ``EncryptedDatabaseError/verificationFailed(path:keyID:detail:)`` when the check
    ///   reports problems or cannot run; the connection is closed either way.
    func requireStillOnOldKey(_ connection: Connection, in context: RotationContext, detail: String) throws(EncryptedDatabaseError) {
        defer { connection.close() }
        let (path, from, to) = (context.path, context.from, context.to)
        let check = "PRAGMA quick_check"
        let found: String
        do {
            guard let problems = try context.problems(running: check, on: connection) else { return }
            // quick_check puts one line per damaged page in its first row: keep the message short.
            let lines = problems.split(whereSeparator: \.isNewline)
            found = lines.prefix(4).joined(separator: "; ") + (lines.count > 4 ? "; …" : "")
        } catch let error as SQLiteError where [.error, .notADatabase, .corrupt].contains(error.code.primary) {
            // A page that fails its HMAC: SQLCipher 4 fails the statement with SQLITE_ERROR,
            // 3.4.1 lists it in the check's rows (or says corrupt / not a database).
            found = "\(check) with key \"\(from.id)\" failed: \(error)"
        } catch {
            // Busy or I/O: whether every page is still on the old key is unknown, so "nothing
            // changed" cannot be claimed either.
            throw .verificationFailed(path: path, keyID: to.id, detail: "SQLCipher reported success (\(detail)) but key \"\(to.id)\" does not open the file, and key \"\(from.id)\" opens page 1 but \(check) could not check the other pages: \(error); whether the file is partly rewritten is unknown. Do not delete its -journal or -wal files; check it with \(check) when it is idle, and restore it from a backup if that reports problems")
        }
        throw .verificationFailed(path: path, keyID: to.id, detail: "the file is partly rewritten: SQLCipher reported success (\(detail)) but key \"\(to.id)\" does not open the file, and key \"\(from.id)\" opens page 1 but not every page (\(found)). Restore the database from a backup; do not delete its -journal or -wal files, which SQLite may need to recover")
    }
}
