import CipherFormats
import DurableFiles
import Foundation
import SQLCipherConnection

/// Rotates a database to a new key by re-encrypting its pages in place, in parallel, under the
/// database's EXCLUSIVE lock and a rollback journal in SQLite's own format (``RollbackJournal``),
/// with OpenSSL's primitives in the file's page format (`PageFormat`: the old and the new key
/// share it, since a change of format goes through the export path).
///
/// The phases, each in its own file: A, take the file and gather what the rewrite needs
/// (``prepare(_:in:fromMaterial:toMaterial:)``); B, write the journal, authenticating every
/// page with the old key, and make it durable before the database is touched; C, rewrite every
/// page and compare it back from disk; D, commit by renaming the journal aside; E, let the engine open the file with
/// the new key, or put the journal back. Why this keeps every file intact through a crash is
/// explained once, in the Key Rotation article.
///
/// It declines (nothing changed) when another connection holds the WAL-mode file (also when
/// another process put the file in WAL mode after this connection last read it), a journal is
/// present, or page 1 does not authenticate with the library's own derivation of the old key;
/// the ``RotationPlan`` then runs the engine's rekey.
struct PageReencryption: Rotation {
    /// The file's page format (chosen by the ``RotationPlan``).
    let format: PageFormat
    /// The default of ``chunkBytes`` (the power-cut tests derive the writes they expect from it).
    static let defaultChunkBytes = 256 * 1024
    /// The bytes each worker reads, transforms and writes at once (rounded to whole pages).
    var chunkBytes = defaultChunkBytes
    /// The bytes written to the journal or the database between two background syncs
    /// (``WriteBehindFile``), so that the disk writes while the pages are being encrypted.
    var writeBehindBytes = 32 * 1024 * 1024

    var method: RotationMethod { .pageReencryption }

    func rotate(_ connection: Connection, in context: RotationContext) throws(EncryptedDatabaseError) -> RotationResult {
        let start = Stopwatch()
        guard let fromMaterial = context.from.material, let toMaterial = context.to.material else {
            return .declined(connection, reason: "a plaintext file is encrypted through the export path")
        }
        try context.requireWritable(connection)

        // Phase A: take the file for ourselves; nothing is written yet.
        let journalMode = try context.step("reading the journal mode") { try connection.journalMode() }
        let wal = try context.leaveWAL(connection)
        if case .heldByAnotherConnection = wal {
            return .declined(connection, reason: "another connection has the WAL-mode file open")
        }
        let leftWAL = wal == .left
        /// Undoes phase A on the connection (nothing was written).
        func release() {
            if leftWAL {
                context.restoreWAL(connection)
            } else if !connection.isAutocommit {
                try? connection.execute("ROLLBACK")
            }
        }
        let prepared: Prepared
        do {
            prepared = try prepare(connection, in: context, fromMaterial: fromMaterial, toMaterial: toMaterial)
        } catch let stop as NotApplicable {
            release()
            return .declined(connection, reason: stop.reason)
        } catch {
            release()
            throw EncryptedDatabaseError.from(error, path: context.path, operation: "preparing the rotation")
        }
        context.logger.notice("rotating database key by page re-encryption", metadata: [
            "path": "\(context.path)", "from": "\(context.from.id)", "to": "\(context.to.id)", "pages": "\(prepared.pageCount)",
            "page_size": "\(format.pageSize)", "bytes": "\(prepared.bytes)", "workers": "\(context.workers)",
        ])

        // Phase B: the journal, durable before the database is touched.
        let rewriteTime = Stopwatch()
        let journalPath = context.path + "-journal"
        let journal: any RandomAccessFile
        do {
            journal = try writeJournal(at: journalPath, prepared: prepared, in: context)
        } catch {
            // writeJournal removed its own file; a file it could not create is not ours to remove.
            release()
            throw error
        }
        defer { journal.close() }

        // Phase C: rewrite every page for the new key, reading each chunk back and comparing it
        // right after it is written. From here until the commit, a failure leaves a hot journal
        // that SQLite rolls back.
        let readBackDuration: Duration
        do {
            readBackDuration = try rewritePages(prepared, walMode: leftWAL, readBack: context.verification != .schema, in: context)
        } catch {
            // A background sync of SQLite's handle may still run: wait for it before the handle goes.
            prepared.database.close()
            connection.close()  // releases the lock with the journal hot
            throw rolledBack(because: (error as? PageFailure)?.detail ?? "\(error)", leftWAL: leftWAL, in: context)
        }
        let rewriteDuration = rewriteTime.elapsed - readBackDuration

        // Phase D: commit — the journal leaves its name (kept aside until the engine has read the
        // file with the new key).
        let undoPath = RotationTemporaries.newPath(for: context.path, suffix: RotationTemporaries.undoSuffix)
        do {
            try context.files.rename(journalPath, undoPath)
        } catch {
            connection.close()
            throw rolledBack(because: EncryptedDatabaseError.ioFailure(path: context.path, operation: "committing the rotation", detail: error.description).description,
                             leftWAL: leftWAL, in: context)
        }
        do {
            try context.files.fsyncDirectory(context.folder)
        } catch {
            // The rename happened; a power cut could still bring the journal back, which rolls
            // the file back to the old key: consistent either way.
            context.logger.warning("folder fsync failed after the rotation's commit", metadata: ["path": "\(context.path)", "error": "\(error)"])
        }
        connection.close()  // releases the EXCLUSIVE lock

        // Phase E: the engine is the judge.
        let engineCheckTime = Stopwatch()
        let verified: Connection
        do {
            verified = try engineVerification(in: context)
        } catch {
            switch error {
            case .notOpened(let detail):
                throw restoreUndo(undoPath, journalPath: journalPath, detail: detail, leftWAL: leftWAL, in: context)
            case .checkFailed(let failure):
                context.files.removeIfPresent(undoPath)
                throw failure
            }
        }
        context.files.removeIfPresent(undoPath)
        // The new page 1 put a file that was in WAL mode back in it at the commit; this only
        // confirms it (and switches through SQLite if the engine did not open it in WAL mode).
        if leftWAL { context.restoreWAL(verified) }

        let report = context.report(method: method, journalMode: journalMode, bytes: prepared.bytes, rewrite: rewriteDuration,
                                    verify: readBackDuration + engineCheckTime.elapsed, since: start)
        context.logger.notice("rotated database key by page re-encryption", metadata: [
            "path": "\(context.path)", "from": "\(context.from.id)", "to": "\(context.to.id)",
            "rewrite_ms": "\(Int(report.rekeyDuration.milliseconds))", "verify_ms": "\(Int(report.verifyDuration.milliseconds))",
        ])
        return .rotated(verified, report)
    }

    // MARK: Failures after the journal

    /// With the lock released and the journal hot, lets SQLite roll the file back on a fresh
    /// connection with the old key, and returns the error to throw.
    private func rolledBack(because detail: String, leftWAL: Bool, in context: RotationContext) -> EncryptedDatabaseError {
        let (path, from, to) = (context.path, context.from, context.to)
        guard let restored = try? context.openFresh(with: from) else {
            context.logger.error("rotation failed and the rollback could not be confirmed", metadata: ["path": "\(path)", "error": "\(detail)"])
            return .verificationFailed(path: path, keyID: to.id, detail: "\(detail); the rotation's journal is beside the file, and the next open rolls it back to key \"\(from.id)\"")
        }
        if leftWAL { context.restoreWAL(restored) }
        restored.close()
        context.logger.warning("rotation failed and was rolled back", metadata: ["path": "\(path)", "key": "\(from.id)", "error": "\(detail)"])
        return .rotationNotApplied(path: path, fromKeyID: from.id, toKeyID: to.id, detail: "\(detail); the file was rolled back and still opens with key \"\(from.id)\"")
    }

    /// Puts the journal back under its name so that SQLite rolls the file back to the old key.
    /// Safe because the engine cannot open the file with the new key, so nobody wrote to it since.
    private func restoreUndo(_ undoPath: String, journalPath: String, detail: String, leftWAL: Bool, in context: RotationContext) -> EncryptedDatabaseError {
        do {
            try context.files.rename(undoPath, journalPath)
            try context.files.fsyncDirectory(context.folder)
        } catch {
            return .verificationFailed(path: context.path, keyID: context.to.id, detail: "\(detail); restoring the original pages failed (\(error)); the original pages are in \(undoPath)")
        }
        return rolledBack(because: detail, leftWAL: leftWAL, in: context)
    }

    // MARK: Phase E

    /// Why the engine's check of the rewritten file failed.
    enum EngineCheckFailure: Error {
        /// The engine does not open the file with the new key: the journal must be put back.
        case notOpened(String)
        /// It opens, but the configured check failed or could not run: the rotation stands.
        case checkFailed(EncryptedDatabaseError)
    }

    /// Opens the file with the new key on a fresh connection and runs the configured check.
    private func engineVerification(in context: RotationContext) throws(EngineCheckFailure) -> Connection {
        let (path, keyID) = (context.path, context.to.id)
        let opened: Connection?
        do {
            opened = try context.openFresh(with: context.to)
        } catch {
            // Busy or I/O: the rotation has committed, only its check could not run.
            throw .checkFailed(.verificationFailed(path: path, keyID: keyID, detail: "the rotation committed (every page read back as written for the new key) but the engine could not open the file to check it: \(error.description)"))
        }
        guard let connection = opened else { throw .notOpened("SQLCipher does not open the rewritten file with the new key") }
        guard let check = context.engineCheck(pagesReadBack: true) else { return connection }
        let problems: String?
        do {
            problems = try context.problems(running: check, on: connection)
        } catch {
            throw .checkFailed(.verificationFailed(path: path, keyID: keyID, detail: "\(check) failed: \(error)"))
        }
        if let problems {
            throw .checkFailed(.verificationFailed(path: path, keyID: keyID, detail: "\(problems) (the file is on the new key; every page read back as written, so the damage predates the rotation)"))
        }
        return connection
    }

    // MARK: Chunks

    /// The pages one worker handles at once.
    func chunkPages(_ format: PageFormat) -> Int { max(1, chunkBytes / format.pageSize) }

    func chunks(_ prepared: Prepared) -> PageChunks {
        PageChunks(pageCount: prepared.pageCount, chunkPages: chunkPages(prepared.format))
    }
}
