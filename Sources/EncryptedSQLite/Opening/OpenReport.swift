/// What happened when a database was opened: which key opened it, what was tried, whether it was
/// created or rotated, and how long each step took.
public struct OpenReport: Sendable, Equatable, Codable {
    /// One key tried on the file.
    public struct KeyAttempt: Sendable, Equatable, Codable {
        /// The key's id.
        public let keyID: String
        /// Whether this key opened the file.
        public let opened: Bool
        /// How long the attempt took (dominated by PBKDF2 for passphrases).
        public let duration: Duration
    }

    /// The database path.
    public let path: String
    /// The id of the key that opened the file.
    public let openedWithKeyID: String
    /// The id of the current key.
    public let currentKeyID: String
    /// The keys tried, in order.
    public let attempts: [KeyAttempt]
    /// `true` when the file did not exist and was created.
    public let created: Bool
    /// The rotation, when one was done.
    public let rotation: RotationReport?
    /// The whole open, from start to handing out the database.
    public let totalDuration: Duration

    /// `true` when the file was rotated to the current key during this open.
    public var rotated: Bool { rotation != nil }

    /// `true` when the database is now on the current key.
    public var isOnCurrentKey: Bool { rotated || openedWithKeyID == currentKeyID }

    /// The same report with a later rotation recorded.
    func with(rotation: RotationReport) -> OpenReport {
        OpenReport(path: path, openedWithKeyID: openedWithKeyID, currentKeyID: currentKeyID, attempts: attempts,
                   created: created, rotation: rotation, totalDuration: totalDuration)
    }
}

/// What a rotation did and how long each step took.
public struct RotationReport: Sendable, Equatable, Codable {
    /// The key the file was on.
    public let fromKeyID: String
    /// The key the file is on now.
    public let toKeyID: String
    /// The journal mode during the rotation (`delete`, `wal`, …).
    public let journalMode: String
    /// The file size in bytes.
    public let bytes: Int64
    /// Rewriting every page with the new key (in place, or the export into the new file).
    public let rekeyDuration: Duration
    /// Verifying on a fresh connection.
    public let verifyDuration: Duration
    /// The verification that was done.
    public let verification: RotationVerification
    /// The whole rotation.
    public let totalDuration: Duration
    /// How the file was rewritten.
    public let method: RotationMethod
}

/// How a rotation rewrote the file.
public enum RotationMethod: String, Sendable, Codable {
    /// Pages re-encrypted in place by the library, in parallel, under the database's EXCLUSIVE
    /// lock and a rollback journal in SQLite's format (same cipher settings, key change only).
    case pageReencryption
    /// `sqlite3_rekey` in one transaction, in place (same cipher settings, key change only): for
    /// files the page re-encryption does not handle (no HMAC, WAL mode with other connections).
    case inPlace
    /// Export to a new file, verification, atomic swap (plaintext, legacy or settings change).
    case export
}
