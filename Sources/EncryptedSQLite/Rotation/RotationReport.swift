/// What a rotation did and how long each step took.
///
/// ```swift
/// if let rotation = try database.rotateToCurrentKey() {
///     print("\(rotation.fromKeyID) -> \(rotation.toKeyID): \(rotation.bytes) bytes in \(rotation.totalDuration)")
/// }
/// ```
public struct RotationReport: Sendable, Equatable, Codable {
    /// The key the file was on.
    public let fromKeyID: String
    /// The key the file is on now.
    public let toKeyID: String
    /// The journal mode during the rotation (`delete`, `wal`, …).
    public let journalMode: String
    /// The database file's size in bytes, as the rotation found it (a background rotation reads it
    /// when it copies the last pages; its copy's own size is ``BackgroundRotationFigures/temporaryBytes``).
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
    /// For a rotation run in the background while the database served
    /// (``OpenOptions/backgroundRotation``): its steps and pauses; `nil` otherwise.
    public var background: BackgroundRotationFigures? = nil
    /// Why a rotation asked to run in the background ran as an ordinary rotation instead (another
    /// process had the file open, a change of cipher settings, …); `nil` otherwise.
    public var fallbackReason: String? = nil
}

/// How a background rotation (``OpenOptions/backgroundRotation``) shared the database with the
/// service while it copied it.
///
/// ```swift
/// if case .finished(let report) = database.backgroundRotation?.state, let figures = report.background {
///     print("\(figures.steps) steps, longest \(figures.longestStep), swap paused writes for \(figures.swapPause)")
/// }
/// ```
public struct BackgroundRotationFigures: Sendable, Equatable, Codable {
    /// The copy steps, each run under the database's writer lock.
    public let steps: Int
    /// The longest time one step held the writer lock.
    public let longestStep: Duration
    /// The swap: the last pages copied, the copy checked, the new file put in place and opened.
    /// Every access waited at most this long (plus one step) because of the rotation.
    public let swapPause: Duration
    /// From the start of the copy to the end of the swap.
    public let copyDuration: Duration
    /// The largest the new file grew beside the old one before the swap (the extra disk space).
    public let temporaryBytes: Int64
}

/// How a rotation rewrote the file.
///
/// ```swift
/// if let rotation = database.report.rotation {
///     print("rotated by \(rotation.method.name)")
/// }
/// ```
public enum RotationMethod: String, Sendable, Codable {
    /// Pages re-encrypted in place by the library, in parallel, under the database's EXCLUSIVE
    /// lock and a rollback journal in SQLite's format (same cipher settings, key change only).
    case pageReencryption
    /// `sqlite3_rekey` in one transaction, in place (same cipher settings, key change only): for
    /// files the page re-encryption does not handle (no HMAC, WAL mode with other connections).
    case inPlace
    /// Export to a new file, verification, atomic swap (plaintext, legacy or settings change).
    case export
    /// Copied page by page into a new file with SQLite's online backup API while the database
    /// served, then checked and swapped in under a short lock (``OpenOptions/backgroundRotation``).
    case backgroundCopy
}

extension RotationMethod {
    /// A short name for reports: `page re-encryption`, `engine rekey` or `export`.
    public var name: String {
        switch self {
        case .pageReencryption: return "page re-encryption"
        case .inPlace: return "engine rekey"
        case .export: return "export"
        case .backgroundCopy: return "background copy"
        }
    }
}
