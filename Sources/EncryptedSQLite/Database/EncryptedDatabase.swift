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
/// keys from oldest to newest. When an older key opened it, the file is rotated to the current key
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
public final class EncryptedDatabase: @unchecked Sendable {
    /// The database path.
    public let path: String
    /// The key list the database was opened with, or, after it followed a rotation made by another
    /// process or ran ``rotateToCurrentKey()``, the list read then from its Keys file or provider.
    public var keys: KeyList { keysLock.withLock { currentKeys } }
    /// The migrations the open applied, in order (empty without a migrator).
    public let appliedMigrations: [String]
    let source: KeyListSource
    let options: OpenOptions
    let readers: ReaderPool?
    let setup: ConnectionSetup
    let logger: Logger
    /// Run the async overloads' work off the cooperative pool: pooled reads that must wait for a
    /// reader on `queue`, writes (and reads on the writer) one after another on `writerQueue`'s
    /// one thread.
    let queue = DispatchQueue(label: "EncryptedSQLite.EncryptedDatabase", attributes: .concurrent)
    let writerQueue = DispatchQueue(label: "EncryptedSQLite.EncryptedDatabase.writer")
    let pendingWrites = PendingWrites()
    var groupCommit: Bool { options.groupCommit }
    private let reentrancy = ReentrancyGuard()
    // Invariant: `writer`, `writerKey` and `currentReport` are only touched with `writerLock` held.
    let writerLock = NSLock()
    var writer: Connection
    var writerKey: ResolvedKey
    var currentReport: OpenReport
    // Apart from `writerLock`, so that `keys` can be read from inside an access closure.
    let keysLock = NSLock()
    var currentKeys: KeyList
    /// The rotation running in the background, if any (``OpenOptions/backgroundRotation``).
    let backgroundSlot = BackgroundRotationSlot()
    /// This database's part in the step-aside protocol (``StepAsideLock``); `nil` when the lock
    /// file cannot be opened or created (a read-only folder).
    let stepAside: StepAsideLock?
    /// `true` from the moment the database stepped aside until it has opened the new file.
    let steppedAside = Locked(false)

    /// Opens (and, unless disabled, rotates, then migrates) the database at `path`.
    ///
    /// One call does it all on the same keyed connection: find the key, rotate the file to the
    /// current key, and apply `migrator`'s pending migrations.
    ///
    /// The list is given once: when another process rotates the file to a key it lacks, this
    /// process cannot follow (``EncryptedDatabaseError/keyUnavailable(path:reason:)``). A process
    /// that must keep running through rotations made elsewhere opens with
    /// ``init(path:keysFile:options:migrator:)`` or ``init(path:keyProvider:options:migrator:)``.
    ///
    /// - Parameters:
    ///   - path: The database file.
    ///   - keys: Its keys, oldest first; the last is the current key.
    ///   - options: Creation, read-only, rotation, busy timeout, verification, reader pool, logging.
    ///   - migrator: Migrations to apply after opening; their identifiers are in
    ///     ``appliedMigrations``.
    /// - Throws: ``EncryptedDatabaseError``: the file is missing, empty, too short, plaintext, not
    ///   opened by any key, busy, read-only, the rotation failed (a failed open leaves the file
    ///   byte-identical), or ``EncryptedDatabaseError/migrationFailed(path:_:)``.
    public convenience init(path: String, keys: KeyList, options: OpenOptions = OpenOptions(), migrator: DatabaseMigrator? = nil) throws(EncryptedDatabaseError) {
        try self.init(path: path, source: .fixed(keys), options: options, migrator: migrator)
    }

    /// Opens the database at `path` with the keys its entry in the Keys file lists, and reads the
    /// Keys file again whenever it finds the file rotated by another process, so a running process
    /// follows rotations made by `rekey` or by other processes without a restart.
    ///
    /// ```swift
    /// let database = try EncryptedDatabase(path: "/srv/app/app.sqlite", keysFile: "/srv/app/Keys",
    ///                                      options: OpenOptions(concurrentReaders: 4))
    /// ```
    ///
    /// Keep the keys in key files (`file:`) or inline: an environment variable set after the
    /// process started is invisible to it (<doc:KeyRotation>).
    /// - Parameters:
    ///   - path: The database file; its entry is found as `KeysFile.keyList(forDatabase:)` finds it.
    ///   - keysFile: The Keys file.
    ///   - options, migrator: As for ``init(path:keys:options:migrator:)``.
    /// - Throws: ``EncryptedDatabaseError/keyUnavailable(path:reason:)`` when the Keys file cannot be
    ///   read or does not list `path`; otherwise as ``init(path:keys:options:migrator:)``.
    public convenience init(path: String, keysFile: String, options: OpenOptions = OpenOptions(), migrator: DatabaseMigrator? = nil) throws(EncryptedDatabaseError) {
        try self.init(path: path, source: .keysFile(keysFile, database: path), options: options, migrator: migrator)
    }

    /// Opens the database at `path` with the key list `keyProvider` returns, and calls it again
    /// whenever the database finds its file rotated by another process, so a running process
    /// follows rotations made elsewhere without a restart. For keys that live elsewhere (a secrets
    /// service, a keychain).
    ///
    /// ```swift
    /// let database = try EncryptedDatabase(path: "app.sqlite", keyProvider: {
    ///     try KeyList(database: "app.sqlite", keys: try secrets.databaseKeys())
    /// })
    /// ```
    ///
    /// `keyProvider` runs on whichever thread met the rotation, with no lock of the database held
    /// by the caller's code; it must not use this database.
    /// - Parameters:
    ///   - path: The database file.
    ///   - keyProvider: Returns the keys, oldest first; the last is the current key.
    ///   - options, migrator: As for ``init(path:keys:options:migrator:)``.
    /// - Throws: ``EncryptedDatabaseError/keyUnavailable(path:reason:)`` when `keyProvider` throws;
    ///   otherwise as ``init(path:keys:options:migrator:)``.
    public convenience init(path: String, keyProvider: @escaping @Sendable () throws -> KeyList, options: OpenOptions = OpenOptions(), migrator: DatabaseMigrator? = nil) throws(EncryptedDatabaseError) {
        try self.init(path: path, source: .provider(keyProvider), options: options, migrator: migrator)
    }

    private init(path: String, source: KeyListSource, options: OpenOptions, migrator: DatabaseMigrator?) throws(EncryptedDatabaseError) {
        // With background rotation, the open hands out the file on whichever key opened it and
        // the rotation runs after the init returns.
        var openOptions = options
        if options.backgroundRotation && !options.readOnly { openOptions.rotateToCurrentKey = false }
        // While another process replaces the file, wait until the new one is in place. A database
        // whose lock file does not exist yet (a new file, or one last opened by an older version)
        // creates it once the file is known to be a database.
        let early = StepAsideLock(databasePath: path, create: false)
        early?.enter()
        let (opened, keys) = try Telemetry.span("open", ["db.path": path], failure: { $0.count("open") }) { () throws(EncryptedDatabaseError) in try ConcurrentOpen(path: path, source: source, options: openOptions, stepAside: early).open() }
        stepAside = early ?? StepAsideLock(databasePath: path, create: !options.readOnly)
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
        self.source = source
        self.options = options
        currentKeys = keys
        logger = options.logger
        writer = opened.connection
        writerKey = opened.key
        currentReport = opened.report
        self.setup = setup
        readers = try Self.makeReaderPool(writer: opened.connection, key: opened.key, path: path, options: options, setup: setup)
        if options.backgroundRotation, options.rotateToCurrentKey, !options.readOnly, !keys.isCurrent(opened.key) {
            startBackgroundRotation(keys: keys)
        }
        if stepAside != nil { StepAsideWatcher.shared.watch(self) }
    }

    /// Closes the writer and every reader. (Cached statements hold their connection, so
    /// connections are closed explicitly rather than left to reference counting.)
    deinit {
        StepAsideWatcher.shared.forget(ObjectIdentifier(self))
        readers?.drain()
        writer.close()
    }

    /// What happened when the database was opened (and, after ``rotateToCurrentKey()``, that
    /// rotation; after it followed a rotation made by another process, that reopening).
    public var report: OpenReport {
        writerLock.withLock { currentReport }
    }

    // MARK: Access

    /// Runs `body` with read-only access on a consistent snapshot (a deferred transaction).
    ///
    /// With a reader pool, reads run concurrently on read-only connections; without one, on the
    /// writer connection, which then refuses statements that write, one caller at a time. Right after `BEGIN` the
    /// library reads the schema version itself, which fixes the snapshot and proves the key; when
    /// that read finds the file rotated by another process, the database follows the rotation and
    /// tries again before `body` ever runs (<doc:KeyRotation>).
    ///
    /// Unavailable from async code (`noasync`): there, `try await` runs the `async` overload,
    /// which does not block a thread of the cooperative pool (<doc:TransactionsAndConcurrency>).
    /// - Throws: whatever `body` throws; `SQLiteError` (code `readOnly`) if `body` tries to write;
    ///   ``EncryptedDatabaseError`` when the file was rotated elsewhere and could not be followed.
    @available(*, noasync, message: "in async code, call it with `try await` (the async overload); in top-level code, from an async function")
    public func read<T>(_ body: (Connection) throws -> T) throws -> T {
        try reentrancy.enter("read") {
            if let readers {
                try stepAsideIfAsked()
                return try followingRotations("read", writerLockHeld: false) { entered in
                    try readers.withReader { db in
                        try Self.proveKey(db)
                        entered()
                        return try body(db)
                    }
                }
            }
            return try writerLock.withLock {
                try readyWriter(operation: "read")
                return try followingRotations("read", writerLockHeld: true) { entered in
                    writer.readsOnly = true
                    defer { writer.readsOnly = false }
                    return try writer.transaction(.deferred) { db in
                        try Self.proveKey(db)
                        entered()
                        return try body(db)
                    }
                }
            }
        }
    }

    /// What ``readOnFreeReader(_:_:)`` did.
    enum ReadOnFreeReader<T> {
        /// `body` ran and returned this.
        case read(T)
        /// `body` did not run: no reader was free, or the file was found rotated elsewhere
        /// before `body` started (`read(_:)` follows the rotation).
        case notNow
    }

    /// Runs `body` as `read(_:)` does, on the calling thread, when a pooled reader is free now
    /// and the file is still on the pool's key; otherwise returns `.notNow` without running it
    /// and without waiting. A failure after `body` started is thrown unchanged, so `body` never
    /// runs twice.
    func readOnFreeReader<T>(_ readers: ReaderPool, _ body: (Connection) throws -> T) throws -> ReadOnFreeReader<T> {
        try reentrancy.enter("read") {
            if let stepAside, stepAside.isAsked || steppedAside.withLock({ $0 }) { return .notNow }
            var started = false
            do {
                let outcome = try readers.withFreeReader { db -> ReadOnFreeReader<T> in
                    try Self.proveKey(db)
                    started = true
                    return .read(try body(db))
                }
                return outcome ?? .notNow
            } catch let error as SQLiteError where error.code.primary == .notADatabase && !started {
                return .notNow
            }
        }
    }

    /// Runs `body` on the writer connection inside an `IMMEDIATE` transaction, one caller at a
    /// time: commits when `body` returns, rolls back when it throws (rethrowing its error
    /// unchanged). Nested `Connection/transaction(_:_:)` calls become savepoints. When `BEGIN`
    /// finds the file rotated by another process, the database follows the rotation and tries
    /// again before `body` ever runs (<doc:KeyRotation>).
    ///
    /// Unavailable from async code (`noasync`): there, `try await` runs the `async` overload,
    /// which does not block a thread of the cooperative pool (<doc:TransactionsAndConcurrency>).
    /// - Throws: whatever `body` throws, or `SQLiteError` when the transaction cannot begin
    ///   (e.g. busy) or commit; ``EncryptedDatabaseError`` when the file was rotated elsewhere and
    ///   could not be followed.
    @available(*, noasync, message: "in async code, call it with `try await` (the async overload); in top-level code, from an async function")
    public func write<T>(_ body: (Connection) throws -> T) throws -> T {
        try reentrancy.enter("write") {
            try writerLock.withLock {
                try readyWriter(operation: "write")
                return try followingRotations("write", writerLockHeld: true) { entered in
                    try writer.transaction(.immediate) { db in
                        entered()
                        return try body(db)
                    }
                }
            }
        }
    }

    /// Runs `body` on the writer connection with no transaction around it, one caller at a time:
    /// for statements that cannot run in a transaction (`VACUUM`, `PRAGMA journal_mode`) or for
    /// code that manages transactions itself. The library reads the schema version first and
    /// follows a rotation made elsewhere that this read finds; a rotation that lands after it
    /// fails `body`'s statements (there is no transaction to retry).
    ///
    /// Unavailable from async code (`noasync`): there, `try await` runs the `async` overload,
    /// which does not block a thread of the cooperative pool (<doc:TransactionsAndConcurrency>).
    /// - Throws: whatever `body` throws; ``EncryptedDatabaseError`` when the file was rotated
    ///   elsewhere and could not be followed.
    @available(*, noasync, message: "in async code, call it with `try await` (the async overload); in top-level code, from an async function")
    public func writeWithoutTransaction<T>(_ body: (Connection) throws -> T) throws -> T {
        try reentrancy.enter("writeWithoutTransaction") {
            try writerLock.withLock {
                try readyWriter(operation: "writeWithoutTransaction")
                return try followingRotations("writeWithoutTransaction", writerLockHeld: true) { entered in
                    try Self.proveKey(writer)
                    entered()
                    return try body(writer)
                }
            }
        }
    }

    /// The key the writer is on now, the busy timeout and the file steps (for backups and health reports).
    var keyAndTimeout: (key: ResolvedKey, busyTimeout: Duration, files: FileOperations) {
        writerLock.withLock { (writerKey, options.busyTimeout, options.files) }
    }

    /// The reader pool's current key material (for tests).
    var readerPoolKey: KeyMaterial? { readers?.readerKey.material }

    /// The reader pool's current key, material and settings (for tests).
    var readerPoolCipherKey: ResolvedKey? { readers?.readerKey }

    /// The number of pooled readers open now (for tests).
    var readerPoolOpenCount: Int { readers?.openCount ?? 0 }
}
