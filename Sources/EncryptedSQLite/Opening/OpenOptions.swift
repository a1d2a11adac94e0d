import Logging

/// How ``EncryptedDatabase`` opens a file.
public struct OpenOptions: Sendable {
    /// Create the database, encrypted with the current key, when the file does not exist.
    /// Off by default, so that a mistyped path is an error and not a new empty database.
    public var createIfMissing: Bool
    /// Open read-only. A file on an older key is then reported with
    /// ``EncryptedDatabaseError/rotationNeeded(path:openedWith:currentKeyID:)`` instead of rotated.
    public var readOnly: Bool
    /// Rotate a file opened with an older key to the current key before handing it out (default).
    /// When off, the database opens on whichever key opened it.
    public var rotateToCurrentKey: Bool
    /// How long to wait for another connection's lock before failing as busy.
    public var busyTimeout: Duration
    /// How thoroughly a rotation is verified on a fresh connection.
    public var verification: RotationVerification
    /// The number of read-only connections for concurrent reads; 0 (the default) runs every
    /// access on the one writer connection. A positive number switches the database to WAL
    /// journal mode (persistently), which lets readers run while the writer writes. Readers are
    /// opened on demand and keyed with the file's derived raw key, so they cost no key derivation.
    public var concurrentReaders: Int
    /// Where events go: opens, creations and rotations, with key ids, paths and timings, never key
    /// material. Silent by default; pass your application's logger to see them.
    public var logger: Logger

    /// Options with the defaults described on each property.
    public init(
        createIfMissing: Bool = false,
        readOnly: Bool = false,
        rotateToCurrentKey: Bool = true,
        busyTimeout: Duration = .seconds(5),
        verification: RotationVerification = .quickCheck,
        concurrentReaders: Int = 0,
        logger: Logger = Logger(label: "EncryptedSQLite", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.createIfMissing = createIfMissing
        self.readOnly = readOnly
        self.rotateToCurrentKey = rotateToCurrentKey
        self.busyTimeout = busyTimeout
        self.verification = verification
        self.concurrentReaders = concurrentReaders
        self.logger = logger
    }
}

/// What a rotation checks on a fresh connection keyed with the new key.
public enum RotationVerification: String, Sendable, Codable {
    /// The schema can be read (proves the key; cheap).
    case schema
    /// `PRAGMA quick_check`: every page of every table and index is read and authenticated
    /// (default; linear in the file size).
    case quickCheck
    /// `PRAGMA integrity_check`: as `quickCheck`, plus index consistency (slowest).
    case integrityCheck
}
