import Foundation
import KeyConfiguration

/// The age of a database's current key against its policy (the Keys file's `max_key_age_days`),
/// from the key's `created:` date. Known without opening the file.
///
/// ```swift
/// let age = KeyAge(path: "app.sqlite", keys: keys, maximumDays: 365)
/// if age.tooOld { print("app.sqlite: make a new key") }
/// ```
///
/// For a database of a Keys file, ``init(_:now:)`` takes the path, key list and policy from its entry.
public struct KeyAge: Sendable, Equatable, Codable {
    /// The database path.
    public let path: String
    /// The current key's id.
    public let keyID: String
    /// Its `created:` day, when the Keys file gives one.
    public let created: String?
    /// Whole days since then, when known.
    public let ageDays: Int?
    /// The policy's maximum, when one applies.
    public let maximumDays: Int?
    /// `true` when the current key is older than the policy allows.
    public let tooOld: Bool

    /// The age of the current key of `keys` at `now`, against `maximumDays`.
    public init(path: String, keys: KeyList, maximumDays: Int?, now: Date = Date()) {
        let createdDate = keys.current.created
        let age = createdDate.map { Int((now.timeIntervalSince($0) / 86_400).rounded(.down)) }
        self.path = path
        keyID = keys.currentID
        created = createdDate.map(KeyCreationDate.text(of:))
        ageDays = age
        self.maximumDays = maximumDays
        if let age, let maximumDays { tooOld = age > maximumDays } else { tooOld = false }
    }
}
