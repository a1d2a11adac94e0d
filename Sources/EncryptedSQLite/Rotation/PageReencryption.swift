import COpenSSLCrypto
import CipherFormats
import DurableFiles
import Foundation
import KeyConfiguration
import Logging
import SQLCipherConnection
import Synchronization

/// Rotates a database to a new key by re-encrypting its pages in place, in parallel, under the
/// database's EXCLUSIVE lock and a rollback journal in SQLite's own format.
///
/// The engine's `sqlite3_rekey` does the same job one page at a time through SQLite's pager
/// (about 40–50 MB/s here). This type reads and writes the file in large chunks through SQLite's
/// own handle of it and runs the cryptography (OpenSSL's AES-256-CBC and HMAC-SHA1, in SQLCipher
/// 3's page format, see ``SQLCipher3PageFormat``) on every core, keeping the guarantees of the
/// engine's in-place rekey:
///
/// - **Locking.** The connection that opened the file takes the EXCLUSIVE lock (`BEGIN EXCLUSIVE`)
///   and holds it until the rewrite is committed: no other connection or process reads or writes
///   meanwhile. Processes that still have the file open with the old key get an error on their
///   next read (the first page no longer decrypts) and cannot write. A WAL-mode file is first
///   switched to rollback mode, which SQLite allows only when no other connection has it open;
///   otherwise the engine's rekey is used (it works alongside WAL readers).
/// - **Crash safety.** Before any page of the database is written, the original pages are in
///   `<path>-journal`, complete and synced (``RollbackJournal``). A kill or power cut at any instant leaves
///   either the untouched file or a hot journal that every SQLite — any process, the `sqlcipher`
///   shell, any key or none — rolls back before reading. The commit is one rename of the journal.
/// - **Verification before commit.** Every rewritten page is read back from the file and
///   authenticated with the new key while the journal can still undo everything. After the commit
///   the engine itself must open the file with the new key; if it cannot, the journal (kept under
///   a temporary name until then) is put back and rolled back.
/// - **Nothing else changes**: same pages, plaintext, page size and salt (as with the engine's
///   rekey: SQLCipher reads the salt when a key is set, before a hot journal is rolled back, so a
///   new salt would make the first open after a crash fail); new keys and new random IVs.
///
/// It does not apply (``Outcome/notApplicable(_:reason:)``, nothing changed) to files without
/// HMAC, in WAL mode with other connections, with a leftover journal, or when page 1 does not
/// authenticate with the library's own derivation of the old key; the caller then uses the
/// engine's rekey (``InPlaceRotation``).
struct PageReencryption {
    let path: String
    let busyTimeout: Duration
    let verification: RotationVerification
    let logger: Logger
    var files: FileOperations = .system
    /// Threads that run the cryptography.
    var workers = max(1, ProcessInfo.processInfo.activeProcessorCount)
    /// The bytes each worker reads, transforms and writes at once (rounded to whole pages).
    var chunkBytes = 256 * 1024


    enum Outcome {
        /// The file is on the new key; the connection is keyed with it and verified.
        case rotated(Connection, RotationReport)
        /// Nothing was changed; rotate `connection` with the engine's rekey instead.
        case notApplicable(Connection, reason: String)
    }

    /// Rotates the file that `connection` (keyed with `from`) has open to `to`. On success the
    /// returned connection is keyed with `to`; `connection` is then closed. On failure nothing is
    /// lost: the file is on `from` (rolled back) unless the error says otherwise.
    func run(connection: Connection, from: ResolvedKey, to: ResolvedKey) throws(EncryptedDatabaseError) -> Outcome {
        let total = Stopwatch()
        guard let fromMaterial = from.material, let toMaterial = to.material, from.writesSameFormat(as: to),
              SQLCipherEngine.linked.writesVersion3Pages,
              let format = SQLCipher3PageFormat(settings: from.cipher),
              let oldIterations = from.cipher.effective.kdfIterations, let newIterations = to.cipher.effective.kdfIterations
        else {
            return .notApplicable(connection, reason: "the file's cipher settings have no HMAC or differ from the new key's")
        }
        try RotationChecks(path: path).requireWritable(connection)

        // Phase A: take the file for ourselves; nothing is written yet.
        let journalMode = try sqlite("reading the journal mode") { try connection.journalMode() }
        let leftWAL: Bool
        if journalMode == "wal" {
            let mode: String?
            do {
                mode = try connection.queryValue("PRAGMA journal_mode = DELETE", as: String.self)
            } catch let error as SQLiteError where error.code.primary == .busy || error.code.primary == .locked {
                mode = nil
            } catch {
                throw .ioFailure(path: path, operation: "leaving WAL mode", detail: "\(error)")
            }
            guard mode?.lowercased() == "delete" else {
                return .notApplicable(connection, reason: "another connection has the WAL-mode file open")
            }
            leftWAL = true
        } else {
            leftWAL = false
        }
        func restoreJournalMode(_ connection: Connection) {
            guard leftWAL else { return }
            restoreWAL(connection)
        }
        func giveUp(_ reason: String) -> Outcome {
            if !connection.isAutocommit { try? connection.execute("ROLLBACK") }
            restoreJournalMode(connection)
            return .notApplicable(connection, reason: reason)
        }
        let prepared: Prepared
        do {
            prepared = try prepare(connection, format: format, fromMaterial: fromMaterial, oldIterations: oldIterations,
                                   toMaterial: toMaterial, newIterations: newIterations)
        } catch let stop as NotApplicable {
            return giveUp(stop.reason)
        } catch {
            if !connection.isAutocommit { try? connection.execute("ROLLBACK") }
            restoreJournalMode(connection)
            throw error as? EncryptedDatabaseError ?? .ioFailure(path: path, operation: "preparing the rotation", detail: "\(error)")
        }
        logger.notice("rotating database key by page re-encryption", metadata: [
            "path": "\(path)", "from": "\(from.id)", "to": "\(to.id)", "pages": "\(prepared.pageCount)",
            "page_size": "\(format.pageSize)", "bytes": "\(prepared.bytes)", "workers": "\(workers)",
        ])

        // Phase B: the journal, made durable before the database is touched.
        let rewriteTime = Stopwatch()
        let journalPath = path + "-journal"
        let journal: any RandomAccessFile
        do {
            journal = try writeJournal(at: journalPath, prepared: prepared)
        } catch {
            // writeJournal removed its own file; a file it could not create is not ours to remove.
            if !connection.isAutocommit { try? connection.execute("ROLLBACK") }
            restoreJournalMode(connection)
            throw error
        }

        // Phase C: rewrite every page for the new key, then read each one back and authenticate it.
        // From here until the commit, a failure leaves a hot journal that SQLite rolls back.
        let verifyTime: Stopwatch
        var authenticateDuration = Duration.zero
        do {
            try rewritePages(prepared)
            verifyTime = Stopwatch()
            if verification != .schema {
                try authenticatePages(prepared)
                authenticateDuration = verifyTime.elapsed
            }
        } catch {
            journal.close()
            throw rollBack(connection, from: from, to: to, reason: error, leftWAL: leftWAL)
        }
        let rewriteDuration = rewriteTime.elapsed - authenticateDuration

        // Phase D: commit — the journal leaves its name (kept aside until the engine has read the
        // file with the new key).
        let undoPath = Self.undoPath(for: path)
        do {
            try files.rename(journalPath, undoPath)
        } catch {
            journal.close()
            throw rollBack(connection, from: from, to: to, reason: EncryptedDatabaseError.ioFailure(path: path, operation: "committing the rotation", detail: error.description), leftWAL: leftWAL)
        }
        do {
            try files.fsyncDirectory(FileSystem.folder(of: path))
        } catch {
            // The rename happened; a power cut could still bring the journal back, which rolls
            // the file back to the old key: consistent either way.
            logger.warning("folder fsync failed after the rotation's commit", metadata: ["path": "\(path)", "error": "\(error)"])
        }
        connection.close()  // releases the EXCLUSIVE lock

        // Phase E: the engine is the judge.
        let engineCheck = Stopwatch()
        let verified: Connection
        do {
            verified = try engineVerification(to: to)
        } catch let failure {
            if case .notOpened(let detail) = failure {
                journal.close()
                throw restoreUndo(undoPath, journalPath: journalPath, from: from, to: to, detail: detail, leftWAL: leftWAL)
            }
            journal.close()
            files.removeIfPresent(undoPath)
            if leftWAL { logger.warning("the rotated file stays in rollback-journal mode", metadata: ["path": "\(path)"]) }
            throw failure.error(path: path, keyID: to.id)
        }
        journal.close()
        files.removeIfPresent(undoPath)
        restoreJournalMode(verified)

        let report = RotationReport(
            fromKeyID: from.id, toKeyID: to.id, journalMode: journalMode, bytes: prepared.bytes,
            rekeyDuration: rewriteDuration, verifyDuration: authenticateDuration + engineCheck.elapsed, verification: verification,
            totalDuration: total.elapsed, method: .pageReencryption)
        logger.notice("rotated database key by page re-encryption", metadata: [
            "path": "\(path)", "from": "\(from.id)", "to": "\(to.id)",
            "rewrite_ms": "\(Int(report.rekeyDuration.milliseconds))", "verify_ms": "\(Int(report.verifyDuration.milliseconds))",
        ])
        return .rotated(verified, report)
    }

    // MARK: Phase A

    /// What the rewrite needs, gathered under the EXCLUSIVE lock.
    struct Prepared: Sendable {
        let format: SQLCipher3PageFormat
        let database: any RandomAccessFile
        let pageCount: UInt32
        let bytes: Int64
        let oldKeys: PageKeys
        let newKeys: PageKeys
        let journal: RollbackJournal
        let mode: mode_t
    }

    /// A reason to leave the rotation to the engine's rekey, found before anything changed.
    struct NotApplicable: Error {
        let reason: String
    }

    private func prepare(_ connection: Connection, format: SQLCipher3PageFormat, fromMaterial: KeyMaterial, oldIterations: Int,
                         toMaterial: KeyMaterial, newIterations: Int) throws -> Prepared {
        try sqlite("locking the database for rotation") { try connection.execute("BEGIN EXCLUSIVE") }
        // Reading inside the transaction makes SQLite take the lock now (and roll back any hot
        // journal another process left), and proves the key once more.
        try sqlite("locking the database for rotation") { try connection.verifyReadable() }
        if FileManager.default.fileExists(atPath: path + "-journal") {
            throw NotApplicable(reason: "a journal file is present beside the database")
        }
        let database = files.observe(try sqlite("opening the database file") { try connection.mainDatabaseFile() })
        let bytes = try io("reading the database size") { () throws(FileSystemError) -> Int64 in try database.size() }
        guard bytes >= Int64(format.pageSize), bytes % Int64(format.pageSize) == 0, bytes / Int64(format.pageSize) < Int64(UInt32.max) else {
            throw NotApplicable(reason: "the file size is not a whole number of \(format.pageSize)-byte pages")
        }
        let pageCount = UInt32(bytes / Int64(format.pageSize))
        try RotationChecks(path: path).requireSpace(bytes: RollbackJournal(pageSize: format.pageSize, databasePages: pageCount).size(recordCount: Int(pageCount)), for: "the rotation's journal")

        let firstPage = PageBuffer(count: format.pageSize)
        let read = try io("reading page 1") { () throws(FileSystemError) -> Int in try database.read(into: firstPage.bytes, at: 0) }
        guard read == format.pageSize else { throw NotApplicable(reason: "page 1 could not be read whole") }
        let salt = Array(firstPage.bytes.prefix(SQLCipher3PageFormat.saltSize))
        // The connection was keyed with the material's derived key for this salt; reuse it.
        let oldSpec = fromMaterial.derived(forSalt: salt, iterations: oldIterations) ?? fromMaterial
        guard let oldKeys = PageKeys.derive(from: oldSpec, salt: salt, kdfIterations: oldIterations),
              let cipher = PageCipher(keys: oldKeys, format: format),
              cipher.authenticates(UnsafeRawBufferPointer(firstPage.bytes), number: 1), !PageCipher.isAllZeros(UnsafeRawBufferPointer(firstPage.bytes))
        else {
            throw NotApplicable(reason: "page 1 does not authenticate with the library's derivation of the old key")
        }
        // The salt stays (as with the engine's rekey): SQLCipher reads a file's salt when a key is
        // set, *before* SQLite rolls back a hot journal, so after a crash a page 1 with a new salt
        // would make the first open of any other SQLCipher fail (measured with the sqlcipher shell).
        guard let newKeys = PageKeys.derive(from: toMaterial, salt: salt, kdfIterations: newIterations) else {
            throw NotApplicable(reason: "the new key could not be derived")
        }
        // Connections opened on the rotated file key with this, without another derivation.
        _ = toMaterial.derivations.value(salt: salt, iterations: newIterations) { newKeys.keySpec }
        return Prepared(format: format, database: database, pageCount: pageCount, bytes: bytes, oldKeys: oldKeys, newKeys: newKeys,
                        journal: RollbackJournal(pageSize: format.pageSize, databasePages: pageCount),
                        mode: FileSystem.permissions(of: path) ?? 0o600)
    }

    // MARK: Phase B

    /// Writes every page as stored into a new journal and makes it durable under a temporary
    /// name, then links it to `<database>-journal` (never replacing a file there) and syncs the
    /// folder: the journal appears under its name only complete and durable, so a power cut while
    /// it is written cannot leave a half-written journal beside the database (SQLite's own
    /// protocol can: a journal whose first block was lost is ignored by SQLite and stays forever).
    private func writeJournal(at journalPath: String, prepared: Prepared) throws(EncryptedDatabaseError) -> any RandomAccessFile {
        let temporary = RotationTemporaries.newPath(for: path, suffix: RotationTemporaries.journalSuffix)
        let journal = try io("creating the journal \(temporary)") { () throws(FileSystemError) -> any RandomAccessFile in
            try files.createFile(temporary, prepared.mode, path)
        }
        let layout = prepared.journal
        let records = Int(prepared.pageCount) - (prepared.pageCount >= prepared.format.lockBytePage ? 1 : 0)
        var linked = false
        do {
            try layout.header(recordCount: UInt32(records)).withUnsafeBytes { header in try journal.write(header, at: 0) }
            let database = prepared.database
            let format = prepared.format
            try chunks(prepared).forEach(workers: workers, makeState: {
                (pages: PageBuffer(count: chunkPages(format) * format.pageSize), records: PageBuffer(count: chunkPages(format) * layout.recordSize))
            }, work: { state, first, count in
                let pages = state.pages.prefix(count * format.pageSize)
                guard try database.read(into: pages, at: Int64(first - 1) * Int64(format.pageSize)) == pages.count else {
                    throw FileSystemError.failed(operation: "read \(path): the file is shorter than its page count", errno: EIO)
                }
                var written = 0
                var firstRecord: Int?
                for index in 0..<count {
                    let number = first + UInt32(index)
                    guard number != format.lockBytePage else { continue }
                    firstRecord = firstRecord ?? Self.recordIndex(of: number, format: format)
                    let page = UnsafeRawBufferPointer(rebasing: pages[(index * format.pageSize)..<((index + 1) * format.pageSize)])
                    let record = UnsafeMutableRawBufferPointer(rebasing: state.records.bytes[(written * layout.recordSize)..<((written + 1) * layout.recordSize)])
                    layout.fillRecord(page: page, number: number, into: record)
                    written += 1
                }
                if let firstRecord {
                    try journal.write(UnsafeRawBufferPointer(state.records.prefix(written * layout.recordSize)), at: layout.recordOffset(firstRecord))
                }
            })
            try journal.synchronize()
            try files.linkWithoutReplacing(temporary, journalPath)
            linked = true
            files.removeIfPresent(temporary)
            try files.fsyncDirectory(FileSystem.folder(of: path))
        } catch {
            // The database is untouched: our journal, complete or not, can go (a journal that was
            // already there when we tried to link ours is not ours).
            journal.close()
            if linked { files.removeIfPresent(journalPath) }
            files.removeIfPresent(temporary)
            if let failure = error as? FileSystemError {
                throw RotationChecks(path: path).error(failure, operation: "writing the rotation's journal")
            }
            throw .ioFailure(path: path, operation: "writing the rotation's journal", detail: "\(error)")
        }
        return journal
    }

    /// The journal record that holds page `number` (the lock-byte page has none).
    static func recordIndex(of number: UInt32, format: SQLCipher3PageFormat) -> Int {
        Int(number) - 1 - (number > format.lockBytePage ? 1 : 0)
    }

    // MARK: Phase C

    /// Decrypts every page with the old key and encrypts it with the new one (fresh IVs, the same
    /// salt in page 1), writing each chunk back in place; then syncs the file.
    /// - Throws: ``EncryptedDatabaseError`` for I/O failures, ``PageFailure`` for a page that does
    ///   not authenticate or OpenSSL failing.
    private func rewritePages(_ prepared: Prepared) throws {
        let format = prepared.format
        let database = prepared.database
        let (oldKeys, newKeys) = (prepared.oldKeys, prepared.newKeys)
        do {
            try chunks(prepared).forEach(workers: workers, makeState: { () throws -> RewriteState in
                guard let old = PageCipher(keys: oldKeys, format: format), let new = PageCipher(keys: newKeys, format: format) else {
                    throw PageFailure(detail: "OpenSSL could not set up the page cipher")
                }
                let pages = chunkPages(format)
                return RewriteState(old: old, new: new, stored: PageBuffer(count: pages * format.pageSize), plain: PageBuffer(count: format.pageSize),
                                    random: PageBuffer(count: pages * format.reserve))
            }, work: { state, first, count in
                let size = format.pageSize
                let stored = state.stored.prefix(count * size)
                let offset = Int64(first - 1) * Int64(size)
                guard try database.read(into: stored, at: offset) == stored.count else {
                    throw FileSystemError.failed(operation: "read \(path): the file is shorter than its page count", errno: EIO)
                }
                guard RAND_bytes(state.random.bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(count * format.reserve)) == 1 else {
                    throw PageFailure(detail: "OpenSSL's random generator failed")
                }
                for index in 0..<count {
                    let number = first + UInt32(index)
                    let page = UnsafeMutableRawBufferPointer(rebasing: stored[(index * size)..<((index + 1) * size)])
                    if number == format.lockBytePage || PageCipher.isAllZeros(UnsafeRawBufferPointer(page)) { continue }
                    guard state.old.decrypt(UnsafeRawBufferPointer(page), number: number, into: state.plain.bytes) else {
                        throw PageFailure(detail: "page \(number) does not authenticate with the old key: the file is damaged")
                    }
                    let random = UnsafeRawBufferPointer(rebasing: state.random.bytes[(index * format.reserve)..<((index + 1) * format.reserve)])
                    guard state.new.encrypt(UnsafeRawBufferPointer(state.plain.bytes), number: number, salt: newKeys.salt, random: random, into: page) else {
                        throw PageFailure(detail: "OpenSSL failed to encrypt page \(number)")
                    }
                }
                try database.write(UnsafeRawBufferPointer(stored), at: offset)
            })
            try database.synchronize()
        } catch let error as FileSystemError {
            throw RotationChecks(path: path).error(error, operation: "rewriting pages for the new key")
        }
    }

    /// Reads every page back from the file and checks its HMAC with the new key.
    /// - Throws: ``EncryptedDatabaseError`` for I/O failures, ``PageFailure`` for a page that does
    ///   not authenticate.
    private func authenticatePages(_ prepared: Prepared) throws {
        do {
            try PageAuthentication(file: prepared.database, format: prepared.format, keys: prepared.newKeys, pageCount: prepared.pageCount,
                                   chunkPages: chunkPages(prepared.format), workers: workers).run()
        } catch let error as FileSystemError {
            throw RotationChecks(path: path).error(error, operation: "reading pages back for verification")
        }
    }

    /// Releases the lock with the journal hot, lets SQLite roll the file back on a fresh
    /// connection with the old key, and returns the error to throw.
    private func rollBack(_ connection: Connection, from: ResolvedKey, to: ResolvedKey, reason: any Error, leftWAL: Bool) -> EncryptedDatabaseError {
        connection.close()
        let detail = (reason as? PageFailure)?.detail ?? "\(reason)"
        let trial = KeyTrial(path: path, access: .readWrite, busyTimeout: busyTimeout)
        guard let restored = try? trial.open(with: from) else {
            logger.error("rotation failed and the rollback could not be confirmed", metadata: ["path": "\(path)", "error": "\(detail)"])
            return .verificationFailed(path: path, keyID: to.id, detail: "\(detail); the rotation's journal is beside the file, and the next open rolls it back to key \"\(from.id)\"")
        }
        if leftWAL { restoreWAL(restored) }
        restored.close()
        logger.warning("rotation failed and was rolled back", metadata: ["path": "\(path)", "key": "\(from.id)", "error": "\(detail)"])
        return .rotationNotApplied(path: path, fromKeyID: from.id, toKeyID: to.id, detail: "\(detail); the file was rolled back and still opens with key \"\(from.id)\"")
    }

    /// Puts a file that the rotation switched to rollback mode back into WAL mode.
    private func restoreWAL(_ connection: Connection) {
        let mode = (try? connection.queryValue("PRAGMA journal_mode = WAL", as: String.self)) ?? nil
        if mode?.lowercased() != "wal" {
            logger.warning("the file could not be put back into WAL mode; it is in rollback-journal mode now", metadata: ["path": "\(path)"])
        }
    }

    // MARK: Phase E

    enum EngineCheckFailure: Error {
        /// The engine does not open the file with the new key.
        case notOpened(String)
        /// It opens, but the configured check failed, or the check could not run.
        case other(EncryptedDatabaseError)

        func error(path: String, keyID: String) -> EncryptedDatabaseError {
            switch self {
            case .notOpened(let detail): return .verificationFailed(path: path, keyID: keyID, detail: detail)
            case .other(let error): return error
            }
        }
    }

    /// Opens the file with the new key on a fresh connection and runs the configured check.
    private func engineVerification(to: ResolvedKey) throws(EngineCheckFailure) -> Connection {
        let trial = KeyTrial(path: path, access: .readWrite, busyTimeout: busyTimeout)
        let opened: Connection?
        do {
            opened = try trial.open(with: to)
        } catch {
            // Busy or I/O: the rotation has committed, only its check could not run.
            throw .other(.verificationFailed(path: path, keyID: to.id, detail: "the rotation committed (every page authenticated with the new key) but the engine could not open the file to check it: \(error.description)"))
        }
        guard let connection = opened else { throw .notOpened("SQLCipher does not open the rewritten file with the new key") }
        let check: String
        switch verification {
        case .schema, .pages: return connection
        case .quickCheck: check = "PRAGMA quick_check"
        case .integrityCheck: check = "PRAGMA integrity_check"
        }
        do {
            let result = try connection.query(check).compactMap { try $0.get(0, as: String?.self) }
            guard result == ["ok"] else {
                throw EngineCheckFailure.other(.verificationFailed(path: path, keyID: to.id, detail: "\(check) reported: \(result.prefix(3).joined(separator: "; ")) (the file is on the new key; its pages all authenticate, so the damage predates the rotation)"))
            }
        } catch let failure as EngineCheckFailure {
            throw failure
        } catch {
            throw .other(.verificationFailed(path: path, keyID: to.id, detail: "\(check) failed: \(error)"))
        }
        return connection
    }

    /// Puts the journal back under its name so that SQLite rolls the file back to the old key.
    /// Safe because the engine cannot open the file with the new key, so nobody wrote to it since.
    private func restoreUndo(_ undoPath: String, journalPath: String, from: ResolvedKey, to: ResolvedKey, detail: String, leftWAL: Bool) -> EncryptedDatabaseError {
        do {
            try files.rename(undoPath, journalPath)
            try files.fsyncDirectory(FileSystem.folder(of: path))
        } catch {
            return .verificationFailed(path: path, keyID: to.id, detail: "\(detail); restoring the original pages failed (\(error)); the original pages are in \(undoPath)")
        }
        let trial = KeyTrial(path: path, access: .readWrite, busyTimeout: busyTimeout)
        guard let restored = try? trial.open(with: from) else {
            return .verificationFailed(path: path, keyID: to.id, detail: "\(detail); the original pages were put back as a journal, which the next open rolls back")
        }
        if leftWAL { _ = try? restored.queryValue("PRAGMA journal_mode = WAL", as: String.self) }
        restored.close()
        return .rotationNotApplied(path: path, fromKeyID: from.id, toKeyID: to.id, detail: "\(detail); the file was rolled back and still opens with key \"\(from.id)\"")
    }

    // MARK: Helpers

    /// A new name for the journal between the commit and the engine's check, in the same folder.
    static func undoPath(for path: String) -> String {
        RotationTemporaries.newPath(for: path, suffix: RotationTemporaries.undoSuffix)
    }

    private func chunkPages(_ format: SQLCipher3PageFormat) -> Int { max(1, chunkBytes / format.pageSize) }

    private func chunks(_ prepared: Prepared) -> PageChunks {
        PageChunks(pageCount: prepared.pageCount, chunkPages: chunkPages(prepared.format))
    }

    private func sqlite<T>(_ operation: String, _ body: () throws -> T) throws(EncryptedDatabaseError) -> T {
        do {
            return try body()
        } catch let error as SQLiteError {
            throw EncryptedDatabaseError.from(error, path: path, operation: operation)
        } catch let error as EncryptedDatabaseError {
            throw error
        } catch {
            throw .ioFailure(path: path, operation: operation, detail: "\(error)")
        }
    }

    private func io<T>(_ operation: String, _ body: () throws(FileSystemError) -> T) throws(EncryptedDatabaseError) -> T {
        do {
            return try body()
        } catch {
            throw RotationChecks(path: path).error(error, operation: operation)
        }
    }

    private struct RewriteState {
        let old: PageCipher
        let new: PageCipher
        let stored: PageBuffer
        let plain: PageBuffer
        let random: PageBuffer
    }
}

/// A page-level failure (authentication, OpenSSL) with a description that holds no key material.
struct PageFailure: Error {
    let detail: String
}

/// Reads every page of a file and checks its HMAC with one set of keys, on several threads.
struct PageAuthentication {
    let file: any RandomAccessFile
    let format: SQLCipher3PageFormat
    let keys: PageKeys
    let pageCount: UInt32
    let chunkPages: Int
    let workers: Int

    /// Throws ``PageFailure`` naming the first page that does not authenticate, or the read error.
    func run() throws {
        let (file, format, keys) = (file, format, keys)
        try PageChunks(pageCount: pageCount, chunkPages: chunkPages).forEach(workers: workers, makeState: { () throws -> (PageCipher, PageBuffer) in
            guard let cipher = PageCipher(keys: keys, format: format) else { throw PageFailure(detail: "OpenSSL could not set up the page cipher") }
            return (cipher, PageBuffer(count: chunkPages * format.pageSize))
        }, work: { state, first, count in
            let size = format.pageSize
            let stored = state.1.prefix(count * size)
            guard try file.read(into: stored, at: Int64(first - 1) * Int64(size)) == stored.count else {
                throw FileSystemError.failed(operation: "read \(file.path): the file is shorter than its page count", errno: EIO)
            }
            for index in 0..<count {
                let number = first + UInt32(index)
                guard number != format.lockBytePage else { continue }
                let page = UnsafeRawBufferPointer(rebasing: stored[(index * size)..<((index + 1) * size)])
                guard state.0.authenticates(page, number: number) else {
                    throw PageFailure(detail: "page \(number) of \(file.path) does not authenticate with the new key")
                }
            }
        })
    }
}

/// The pages 1...pageCount in chunks of `chunkPages`, processed by several threads.
struct PageChunks {
    let pageCount: UInt32
    let chunkPages: Int

    var chunkCount: Int { (Int(pageCount) + chunkPages - 1) / chunkPages }

    /// Runs `work` on every chunk (first page number, page count) on up to `workers` threads; each
    /// thread first makes its own state with `makeState`. Stops at the first error and rethrows it.
    func forEach<State>(workers: Int, makeState: @Sendable () throws -> State, work: @Sendable (inout State, UInt32, Int) throws -> Void) throws {
        let next = Atomic<Int>(0)
        let failure = Mutex<(any Error)?>(nil)
        let threads = max(1, min(workers, chunkCount))
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            do {
                var state = try makeState()
                while failure.withLock({ $0 == nil }) {
                    let index = next.add(1, ordering: .relaxed).oldValue
                    guard index < chunkCount else { break }
                    let first = UInt32(index * chunkPages + 1)
                    let count = min(chunkPages, Int(pageCount) - index * chunkPages)
                    try work(&state, first, count)
                }
            } catch {
                failure.withLock { if $0 == nil { $0 = error } }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
    }
}

/// A heap buffer owned by one worker thread, zeroed before it is freed (it holds decrypted pages).
final class PageBuffer {
    let bytes: UnsafeMutableRawBufferPointer

    init(count: Int) {
        bytes = .allocate(byteCount: max(count, 1), alignment: 64)
        bytes.initializeMemory(as: UInt8.self, repeating: 0)
    }

    deinit {
        explicit_bzero(bytes.baseAddress!, bytes.count)
        bytes.deallocate()
    }

    /// The first `count` bytes.
    func prefix(_ count: Int) -> UnsafeMutableRawBufferPointer { UnsafeMutableRawBufferPointer(rebasing: bytes[0..<count]) }
}
