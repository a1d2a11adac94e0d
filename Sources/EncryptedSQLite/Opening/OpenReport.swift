/// What happened when a database was opened: which key opened it, what was tried, whether it was
/// created or rotated, and how long each step took.
///
/// ```swift
/// let database = try EncryptedDatabase(path: "app.sqlite", keysFile: "Keys")
/// let report = database.report
/// print("opened with \(report.openedWithKeyID) after \(report.attempts.count) attempts; rotated: \(report.rotated)")
/// ```
public struct OpenReport: Sendable, Equatable, Codable {
    /// One key tried on the file (see ``EncryptedSQLite/KeyAttempt``).
    public typealias KeyAttempt = EncryptedSQLite.KeyAttempt

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

    /// `false` when the current key opened the file but in another format than its settings name
    /// (a 3.x file under a current key for SQLCipher 4's format): the file then needs a rotation
    /// like a file on an older key.
    public let openedInCurrentFormat: Bool

    /// `true` when the file was rotated to the current key during this open.
    public var rotated: Bool { rotation != nil }

    /// `true` when the database is now on the current key.
    public var isOnCurrentKey: Bool { rotated || (openedWithKeyID == currentKeyID && openedInCurrentFormat) }

    /// The same report with a later rotation recorded.
    func with(rotation: RotationReport) -> OpenReport {
        OpenReport(path: path, openedWithKeyID: openedWithKeyID, currentKeyID: rotation.toKeyID, attempts: attempts,
                   created: created, rotation: rotation, totalDuration: totalDuration, openedInCurrentFormat: openedInCurrentFormat)
    }
}
