/// One key tried on a file: which key, whether it opened the file, and how long the attempt took.
/// Opening, checking which key opens a file and the inspection tools report the keys they tried,
/// in order.
///
/// ```swift
/// for attempt in database.report.attempts {
///     print(attempt.keyID, attempt.opened, attempt.duration)
/// }
/// ```
public struct KeyAttempt: Sendable, Equatable, Codable {
    /// The key's id.
    public let keyID: String
    /// Whether this key opened the file.
    public let opened: Bool
    /// How long the attempt took (dominated by PBKDF2 for passphrases).
    public let duration: Duration
}
