/// The result of ``EncryptedDatabase/check(path:keys:busyTimeout:)``.
///
/// ```swift
/// let check = try EncryptedDatabase.check(path: "app.sqlite", keys: keys)
/// if check.needsRotation { print("on \(check.openedWithKeyID), current is \(check.currentKeyID)") }
/// ```
public struct KeyCheck: Sendable, Equatable {
    /// The database path.
    public let path: String
    /// The id of the key that opens the file.
    public let openedWithKeyID: String
    /// The id of the current key.
    public let currentKeyID: String
    /// The keys tried, in order.
    public let attempts: [KeyAttempt]

    /// `true` when the file is on an older key, or on the current key in another format than
    /// the current key's settings name (a 3.x file under a current key for the 4.x format).
    public let needsRotation: Bool
}
