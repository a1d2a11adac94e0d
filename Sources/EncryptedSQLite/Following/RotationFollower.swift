import DurableFiles
import Foundation
import KeyConfiguration
import Logging
import SQLCipherConnection

/// Keeps an ``EncryptedDatabase``'s writer and readers on the file its path names, whoever rotates
/// it: follows a rotation another process made (``catchUp(operation:)``), stands aside while
/// another process replaces the file (``StepAsideLock``), rotates the file here
/// (``rotate(keys:fallbackReason:)``), and runs the background rotation's copy and swap.
///
/// It changes the writer only through ``SerializedWriter/swap(to:key:report:)``, with the writer's
/// lock held, and re-keys the reader pool beside it; the database itself holds no lock.
///
/// ```swift
/// let value = try follower.followingRotations("read", writerLockHeld: false) { entered in
///     try readers.withReader { db in try RotationFollower.proveKey(db); entered(); return try body(db) }
/// }
/// ```
final class RotationFollower: Sendable {
    let path: String
    let source: KeyListSource
    let options: OpenOptions
    let setup: ConnectionSetup
    let writer: SerializedWriter
    let readers: ReaderPool?
    /// The key list last read from ``source`` (at the open, or when a rotation was followed or made).
    let keys: Locked<KeyList>
    /// The rotation running in the background, if any (``OpenOptions/backgroundRotation``).
    let backgroundSlot = BackgroundRotationSlot()
    /// This database's part in the step-aside protocol (``StepAsideLock``); `nil` when the lock
    /// file cannot be opened or created (a read-only folder).
    let stepAside: StepAsideLock?
    /// `true` from the moment the database stepped aside until it has opened the new file.
    let steppedAside = Locked(false)
    var logger: Logger { options.logger }

    init(path: String, source: KeyListSource, keys: KeyList, options: OpenOptions, setup: ConnectionSetup, writer: SerializedWriter, readers: ReaderPool?, stepAside: StepAsideLock?) {
        self.path = path
        self.source = source
        self.keys = Locked(keys)
        self.options = options
        self.setup = setup
        self.writer = writer
        self.readers = readers
        self.stepAside = stepAside
    }

    // MARK: Following rotations made elsewhere

    /// The library's own read right after `BEGIN` (and before `writeWithoutTransaction`'s body):
    /// it starts the read transaction, so a file another process rotated fails here, before any
    /// code of the caller ran.
    static func proveKey(_ connection: Connection) throws {
        try connection.readSchemaVersion()
    }

    /// `true` when the writer is open and reads the file (with the writer's lock held).
    var writerReadsFile: Bool {
        !writer.connection.isClosed && (try? Self.proveKey(writer.connection)) != nil
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
                    try writer.withLock { () throws(EncryptedDatabaseError) in try catchUp(operation: operation) }
                }
            } catch let error as SQLiteError where error.code == .readOnlyRollback && !started && !writerLockHeld && rolledBack < 3 {
                rolledBack += 1
                try writer.withLock {
                    try readyWriter(operation: operation)
                    logger.notice("a reader found a hot journal (a process died inside a write); the writer rolls it back", metadata: ["path": "\(path)"])
                    try writer.connection.transaction(.deferred) { db in try Self.proveKey(db) }
                }
            }
        }
    }

    /// With the writer's lock held: when the writer no longer reads the file, reads the key list
    /// again, opens the file with the key it is on now (waiting within the busy timeout for a
    /// rotation in progress, rotating if the file is still not on the current key), and swaps the
    /// writer and the readers' key. Does nothing when the writer still reads the file (another
    /// thread caught up first).
    /// - Throws: ``EncryptedDatabaseError`` when the file cannot be opened, or the database was closed.
    func catchUp(operation: String) throws(EncryptedDatabaseError) {
        if writerReadsFile { return }
        guard !writer.isShutDown else { throw .closed(path: path) }
        abandonBackgroundRotation(reason: "another process rotated the file")
        let previous = writer.key.id
        logger.notice("the database file was rotated by another process; following the rotation", metadata: [
            "path": "\(path)", "key": "\(previous)", "operation": "\(operation)",
        ])
        var reopen = options
        reopen.createIfMissing = false
        let opened: DatabaseOpener.Opened, keys: KeyList
        do {
            (opened, keys) = try RotationRetryingOpen(path: path, source: source, options: reopen, stepAside: stepAside).open(afterRotationElsewhere: true)
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
        writer.swap(to: opened.connection, key: opened.key, report: opened.report)
        self.keys.withLock { $0 = keys }
        readers?.replaceKey(ReaderPool.key(for: opened.key, path: path, options: options))
        Telemetry.followedRotation(fromKey: previous, toKey: opened.report.openedWithKeyID, outcome: "followed")
        logger.notice("followed a rotation made by another process", metadata: [
            "path": "\(path)", "from": "\(previous)", "to": "\(opened.report.openedWithKeyID)",
            "rotated": "\(opened.report.rotated)", "operation": "\(operation)",
        ])
    }

    /// With the writer's lock held, after a rotation or a swap that failed: reopens the writer on
    /// the key it was on, which still opens the file, when it was left closed (or, `always`, in any
    /// case: a failed rotation may leave it open in a state of its own). When that fails, a later
    /// access that finds it closed tries again (``readyWriter(operation:)``).
    func reopenWriterAfterFailure(always: Bool = false) {
        guard always || writer.connection.isClosed, !writer.isShutDown,
              let reopened = try? KeyedConnections(path: path, access: .readWrite, busyTimeout: options.busyTimeout).open(with: writer.key)
        else { return }
        try? setup.run(on: reopened)
        writer.swap(to: reopened, key: writer.key)
    }
}
