import DurableFiles
import Foundation
import Logging

/// How ``EncryptedDatabase`` opens a file.
///
/// ```swift
/// var options = OpenOptions(createIfMissing: true, concurrentReaders: 4, backgroundRotation: true)
/// options.busyTimeout = .seconds(10)
/// let database = try EncryptedDatabase(path: "app.sqlite", keysFile: "Keys", options: options)
/// ```
public struct OpenOptions: Sendable {
    /// Create the database, encrypted with the current key, when the file does not exist.
    /// Off by default, so that a mistyped path is an error and not a new empty database.
    public var createIfMissing: Bool
    /// Open read-only. A file on an older key is then reported with
    /// ``EncryptedDatabaseError/rotationNeeded(path:openedWith:currentKeyID:)`` instead of rotated.
    public var readOnly: Bool
    /// Rotate a file opened with an older key to the current key (default): before handing it out,
    /// or with ``backgroundRotation``, in the background while it serves. When off, the database
    /// opens on whichever key opened it and does not rotate at all, in the background neither:
    /// ``backgroundRotation`` is then ignored. Rotate later with
    /// ``EncryptedDatabase/rotateToCurrentKey()`` or ``EncryptedDatabase/rotateInBackground()``.
    public var rotateToCurrentKey: Bool
    /// How long to wait for another connection's lock before failing as busy.
    public var busyTimeout: Duration
    /// How thoroughly a rotation is verified.
    public var verification: RotationVerification
    /// How a key-only rotation rewrites the file (page re-encryption when possible by default).
    public var rotationStrategy: RotationStrategy
    /// How many threads a page re-encryption uses for its cryptography: by default one per active
    /// processor. Lower it to leave cores to other work (a server rotating tenant databases).
    /// Kept within 1...``maximumRotationThreads`` (each thread holds about 1 MiB of buffers).
    public var rotationThreads: Int {
        get { boundedRotationThreads }
        set { boundedRotationThreads = min(max(1, newValue), Self.maximumRotationThreads) }
    }
    private var boundedRotationThreads = 1

    /// The most threads one page re-encryption uses, whatever ``rotationThreads`` says.
    public static let maximumRotationThreads = 256
    /// The number of read-only connections for concurrent reads; 0 (the default) runs every
    /// access on the one writer connection. A positive number switches the database to WAL
    /// journal mode (persistently), which lets readers run while the writer writes. Readers are
    /// opened on demand and keyed with the file's derived raw key, so they cost no key derivation.
    public var concurrentReaders: Int
    /// Where events go: opens, creations and rotations, with key ids, paths and timings, never key
    /// material. Silent by default; pass your application's logger to see them.
    public var logger: Logger

    /// Enforce foreign keys (`PRAGMA foreign_keys = ON`) on the writer and on every pooled reader
    /// (default, as GRDB does). Set it to `false` to keep SQLite's own default: `REFERENCES`
    /// clauses are accepted but not enforced. The migrator turns enforcement off while it migrates
    /// (see the Migrations article).
    public var foreignKeys = true
    /// When the file is on an older key, hand the database out at once, on that key, and rotate
    /// the file to the current key in the background while it serves (default `false`: the open
    /// rotates before it returns, holding the database for the whole rewrite).
    ///
    /// The background rotation copies the database page by page into a new file encrypted with
    /// the current key (SQLite's online backup API on the writer connection), a few milliseconds
    /// of the writer's time per step; reads and writes go on between the steps and are carried
    /// into the copy. It then checks the copy on a fresh connection and swaps it in under one
    /// short lock. It needs free space for a second copy of the file. When another process has the
    /// file open, or the rotation changes cipher settings, it runs as an ordinary rotation instead
    /// (``RotationReport/fallbackReason`` says why). Follow it with
    /// ``EncryptedDatabase/backgroundRotation`` (<doc:KeyRotation>). Ignored when
    /// ``rotateToCurrentKey`` is off (nothing rotates at the open) or with ``readOnly``.
    public var backgroundRotation = false
    /// Let async writes that wait for the writer at the same moment share one transaction and one
    /// commit (default `true`): while one commit waits for the disk, the writes that arrive queue
    /// up, and the next transaction runs them all, each in a savepoint of its own, then commits
    /// once. Each closure still runs exactly once and its caller resumes only after the commit
    /// that holds its changes; a closure that throws rolls back only its own changes and only its
    /// caller gets the error. What they share: when the commit fails (or SQLite ends the
    /// transaction, as on a full disk), every write of that transaction fails with that error.
    /// Blocking `write(_:)` calls never share a transaction. Set it to `false` for one transaction
    /// per async write.
    public var groupCommit = true
    /// How long an async access waits for the writer before it gives up with
    /// ``EncryptedDatabaseError/writerWaitExpired(path:waited:)`` (default `nil`: it waits as long
    /// as the writer is held). It bounds the async `write`, `writeWithoutTransaction` and
    /// ``EncryptedDatabase/writeTransaction(waitingAtMost:_:)``, and async reads without a
    /// reader pool (they run on the writer). A foreground rotation holds the writer for as long
    /// as it takes (seconds per hundred megabytes); a request handler that must answer sooner
    /// sets this, or passes its own limit to ``EncryptedDatabase/write(waitingAtMost:_:)``.
    /// Work given up never runs. Blocking calls are not bounded by it.
    ///
    /// ```swift
    /// var options = OpenOptions(concurrentReaders: 4)
    /// options.writerWaitLimit = .seconds(2)   // then answer 503 instead of holding the request
    /// ```
    public var writerWaitLimit: Duration?
    /// Runs on each connection your code gets — the writer, and every pooled reader — when it
    /// opens, and again when it reopens after a rotation: register SQL functions and collations,
    /// set pragmas (GRDB's `Configuration.prepareDatabase`). `nil` by default.
    ///
    /// ```swift
    /// var options = OpenOptions(concurrentReaders: 2)
    /// options.prepareConnection = { db in
    ///     try db.createFunction("normalize", argumentCount: 1, deterministic: true) { args in
    ///         if case .text(let text) = args[0] { return text.lowercased() } else { return nil }
    ///     }
    /// }
    /// ```
    ///
    /// On the writer it runs after the file is rotated to the current key and before the
    /// migrator, so migrations can use what it registers; foreign keys are set first, so it can
    /// change them too. Readers run it when the pool opens them. It must not start a transaction
    /// that it leaves open. Connections the library opens for itself (finding the key, rotating,
    /// verifying) never run it. When it throws, the open fails with the error mapped to an
    /// ``EncryptedDatabaseError`` (a `SQLiteError` by its code, anything else as `ioFailure`),
    /// and a read fails with the error itself.
    public var prepareConnection: (@Sendable (Connection) throws -> Void)?

    /// Options with the defaults described on each property.
    ///
    /// ```swift
    /// let options = OpenOptions(concurrentReaders: 4, backgroundRotation: true, logger: logger)
    /// ```
    public init(
        createIfMissing: Bool = false,
        readOnly: Bool = false,
        rotateToCurrentKey: Bool = true,
        busyTimeout: Duration = .seconds(5),
        verification: RotationVerification = .pages,
        rotationStrategy: RotationStrategy = .automatic,
        rotationThreads: Int = OpenOptions.processorCount,
        concurrentReaders: Int = 0,
        backgroundRotation: Bool = false,
        foreignKeys: Bool = true,
        groupCommit: Bool = true,
        logger: Logger = Logger(label: "EncryptedSQLite", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.createIfMissing = createIfMissing
        self.readOnly = readOnly
        self.rotateToCurrentKey = rotateToCurrentKey
        self.busyTimeout = busyTimeout
        self.verification = verification
        self.rotationStrategy = rotationStrategy
        self.concurrentReaders = concurrentReaders
        self.backgroundRotation = backgroundRotation
        self.foreignKeys = foreignKeys
        self.groupCommit = groupCommit
        self.logger = logger
        self.rotationThreads = rotationThreads
    }

    /// The default of ``rotationThreads``: `ProcessInfo.activeProcessorCount`, read once per process
    /// (on Linux it reads the cgroup's CPU quota and cpuset files, ~20 µs, which every
    /// `OpenOptions()` paid before).
    public static let processorCount = ProcessInfo.processInfo.activeProcessorCount

    /// The file-system operations rotations use; tests replace them to inject failures or to
    /// simulate a power cut.
    var files: FileOperations = .system
}
