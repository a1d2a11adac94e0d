import CipherFormats
import DatabaseMigrations
import DurableFiles
import Foundation
import KeyConfiguration
import Logging
import SQLCipherConnection

/// An encrypted SQLite database opened with an ordered key list, safe to use from many threads
/// and tasks.
///
/// Opening finds the key that opens the file, trying the current key first and then the older
/// keys from newest to oldest. When an older key opened it, the file is rotated to the current key
/// before the database is handed out, and the rotation is verified on a fresh connection. A
/// `DatabaseMigrator` given to the open then runs on the same keyed connection.
///
/// ```swift
/// let keys = try KeysFile.load(path: "Keys").keyList(forDatabase: "app.sqlite")
/// let database = try EncryptedDatabase(path: "app.sqlite", keys: keys, migrator: migrator)
/// try database.write { db in try db.execute("INSERT INTO notes(text) VALUES (?)", ["hello"]) }
/// let count = try database.read { db in try db.queryValue("SELECT count(*) FROM notes", as: Int.self) }
/// let notes = try await database.read { db in try db.query(Note.self, "SELECT * FROM notes") }
/// ```
///
/// Access model: one writer connection, used by one caller at a time (`write(_:)` in an
/// `IMMEDIATE` transaction, `writeWithoutTransaction(_:)` without). Reads run on the writer
/// too, serialized with writes, unless ``OpenOptions/concurrentReaders`` asks for a pool of
/// read-only connections in WAL mode; then reads run concurrently with each other and with the
/// writer, each on a consistent snapshot.
public final class EncryptedDatabase: Sendable {
    /// The database path.
    public let path: String
    /// The key list the database was opened with, or, after it followed a rotation made by another
    /// process or ran ``rotateToCurrentKey()``, the list read then from its Keys file or provider.
    public var keys: KeyList { follower.keys.withLock { $0 } }
    /// The migrations the open applied, in order (empty without a migrator).
    public let appliedMigrations: [String]
    /// The one writer connection, its lock, queue and group commit.
    let writer: SerializedWriter
    /// The writer connection's thread as a task executor: a task that mostly writes runs there
    /// with `Task(executorPreference: database.writerExecutor)`, and its awaited writes then need
    /// no hand-over between threads (see ``WriterExecutor``).
    ///
    /// ```swift
    /// let ingest = Task(executorPreference: database.writerExecutor) {
    ///     for row in rows { try await database.write { db in try db.execute(insert, row) } }
    /// }
    /// ```
    public var writerExecutor: WriterExecutor { writer.executor }
    /// Read-only connections for concurrent reads (``OpenOptions/concurrentReaders``), or `nil`.
    let readers: ReaderPool?
    /// Keeps the writer and readers on the file whoever rotates it: rotations made elsewhere,
    /// stepping aside, rotations made here, the background rotation.
    let follower: RotationFollower
    /// Detects an access closure that calls back into this database on the same thread.
    let reentrancy = ReentrancyGuard()
    /// `true` once ``close()`` was called: every new call throws ``EncryptedDatabaseError/closed(path:)``.
    let closing = Locked(false)
    /// Runs the async overloads' work that may block (a pooled read waiting for a reader, an async
    /// rotation) off the cooperative pool and off Dispatch's rationed global threads.
    let queue = BlockingWork(label: "EncryptedSQLite.EncryptedDatabase")

    /// The open every public initializer runs (EncryptedDatabase+Opening.swift).
    init(path: String, source: KeyListSource, options: OpenOptions, migrator: DatabaseMigrator?) throws(EncryptedDatabaseError) {
        // With background rotation, the open hands out the file on whichever key opened it and
        // the rotation runs after the init returns.
        var openOptions = options
        if options.backgroundRotation && !options.readOnly { openOptions.rotateToCurrentKey = false }
        // While another process replaces the file, wait until the new one is in place. A database
        // whose lock file does not exist yet (a new file, or one last opened by an older version)
        // creates it once the file is known to be a database.
        let early = StepAsideLock(databasePath: path, create: false)
        early?.enter()
        let (opened, keys) = try Telemetry.span("open", ["db.path": path], failure: { $0.count("open") }) { () throws(EncryptedDatabaseError) in try RotationRetryingOpen(path: path, source: source, options: openOptions, stepAside: early).open() }
        let stepAside = early ?? StepAsideLock(databasePath: path, create: !options.readOnly)
        if early == nil { stepAside?.enter() }
        let setup = ConnectionSetup(options: options)
        do {
            try setup.runOnWriter(opened.connection, path: path)
        } catch {
            opened.connection.close()
            throw error
        }
        if let migrator {
            do {
                let stopwatch = Stopwatch()
                appliedMigrations = try Telemetry.span("migrate", ["db.path": path]) { () throws(MigrationError) in try migrator.migrate(opened.connection) }
                Telemetry.migrated(count: appliedMigrations.count, duration: stopwatch.elapsed)
            } catch {
                throw .migrationFailed(path: path, error)
            }
        } else {
            appliedMigrations = []
        }
        self.path = path
        writer = SerializedWriter(connection: opened.connection, key: opened.key, report: opened.report, groupCommit: options.groupCommit)
        readers = try ReaderPool.open(writer: opened.connection, key: opened.key, path: path, options: options, setup: setup)
        follower = RotationFollower(
            path: path, source: source, keys: keys, options: options, setup: setup, writer: writer, readers: readers, stepAside: stepAside)
        if options.backgroundRotation, options.rotateToCurrentKey, !options.readOnly, !keys.isCurrent(opened.key) {
            follower.startBackgroundRotation(keys: keys, owner: self)
        }
        if stepAside != nil { StepAsideWatcher.shared.watch(follower) }
    }

    /// Closes the writer and every reader. (Cached statements hold their connection, so
    /// connections are closed explicitly rather than left to reference counting.)
    deinit {
        closeConnections()
    }

    /// What happened when the database was opened (and, after ``rotateToCurrentKey()``, that
    /// rotation; after it followed a rotation made by another process, that reopening).
    public var report: OpenReport {
        writer.withLock { writer.report }
    }
}
