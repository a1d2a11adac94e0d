import KeyConfiguration
import SQLCipherConnection

extension EncryptedDatabase {
    // MARK: Following rotations made elsewhere

    /// The library's own read right after `BEGIN` (and before `writeWithoutTransaction`'s body):
    /// it starts the read transaction, so a file another process rotated fails here, before any
    /// code of the caller ran.
    static func proveKey(_ connection: Connection) throws {
        try connection.readSchemaVersion()
    }

    /// `true` when the writer is open and reads the file (with `writerLock` held).
    var writerReadsFile: Bool {
        !writer.isClosed && (try? Self.proveKey(writer)) != nil
    }

    /// Runs `attempt`; when it fails with SQLite's "not a database" before it called `entered`
    /// (so before the caller's closure started), the file was rotated by another process: follows
    /// the rotation (``catchUp(operation:)``) and runs `attempt` again. A failure after `entered`
    /// is the caller's and is thrown unchanged, so the caller's closure never runs twice.
    ///
    /// A pooled reader (read-only) that finds a hot journal, left by a process that died inside a
    /// write in rollback-journal mode, cannot roll it back (SQLite's `SQLITE_READONLY_ROLLBACK`):
    /// the writer, which can, reads the file once (SQLite rolls the journal back then) and the
    /// read runs again.
    func followingRotations<T>(_ operation: String, writerLockHeld: Bool, _ attempt: (_ entered: () -> Void) throws -> T) throws -> T {
        var followed = 0, rolledBack = 0
        while true {
            var started = false
            do {
                return try attempt { started = true }
            } catch let error as SQLiteError where error.code.primary == .notADatabase && !started && followed < 3 {
                followed += 1
                if writerLockHeld {
                    try catchUp(operation: operation)
                } else {
                    try writerLock.withLock { try catchUp(operation: operation) }
                }
            } catch let error as SQLiteError where error.code == .readOnlyRollback && !started && !writerLockHeld && rolledBack < 3 {
                rolledBack += 1
                try writerLock.withLock {
                    try readyWriter(operation: operation)
                    logger.notice("a reader found a hot journal (a process died inside a write); the writer rolls it back", metadata: ["path": "\(path)"])
                    try writer.transaction(.deferred) { db in try Self.proveKey(db) }
                }
            }
        }
    }

    /// With `writerLock` held: when the writer no longer reads the file, reads the key list again,
    /// opens the file with the key it is on now (waiting within the busy timeout for a rotation in
    /// progress, rotating if the file is still not on the current key), and swaps the writer and
    /// the readers' key. Does nothing when the writer still reads the file (another thread caught
    /// up first).
    func catchUp(operation: String) throws(EncryptedDatabaseError) {
        if writerReadsFile { return }
        abandonBackgroundRotation(reason: "another process rotated the file")
        let previous = writerKey.id
        logger.notice("the database file was rotated by another process; following the rotation", metadata: [
            "path": "\(path)", "key": "\(previous)", "operation": "\(operation)",
        ])
        var reopen = options
        reopen.createIfMissing = false
        let opened: DatabaseOpener.Opened, keys: KeyList
        do {
            (opened, keys) = try ConcurrentOpen(path: path, source: source, options: reopen, stepAside: stepAside).open(afterRotationElsewhere: true)
        } catch {
            logger.error("could not follow a rotation made by another process", metadata: ["path": "\(path)", "key": "\(previous)", "error": "\(error)"])
            Telemetry.followedRotation(fromKey: previous, toKey: nil, outcome: "failed")
            throw error
        }
        try? setup.run(on: opened.connection)
        if readers != nil, !options.readOnly, (try? opened.connection.journalMode()) != "wal" {
            // The file came back in rollback-journal mode (a process died between leaving WAL mode
            // and swapping in its new file): the pool's readers need WAL mode to read beside the
            // writer, as when the database was opened.
            _ = try? opened.connection.queryValue("PRAGMA journal_mode = WAL", as: String.self)
        }
        writer.close()
        writer = opened.connection
        writerKey = opened.key
        currentReport = opened.report
        keysLock.withLock { currentKeys = keys }
        readers?.replaceKey(Self.readerKey(for: opened.key, path: path, options: options))
        Telemetry.followedRotation(fromKey: previous, toKey: opened.report.openedWithKeyID, outcome: "followed")
        logger.notice("followed a rotation made by another process", metadata: [
            "path": "\(path)", "from": "\(previous)", "to": "\(opened.report.openedWithKeyID)",
            "rotated": "\(opened.report.rotated)", "operation": "\(operation)",
        ])
    }
}
