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

extension RotationMethod {
    /// A short name for reports: `page re-encryption`, `engine rekey` or `export`.
    public var name: String {
        switch self {
        case .pageReencryption: return "page re-encryption"
        case .inPlace: return "engine rekey"
        case .export: return "export"
        }
    }
}
