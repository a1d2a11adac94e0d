import Foundation
import KeyConfiguration

/// The age of a database's current key against its policy (the Keys file's `max_key_age_days`),
/// from the key's `created:` date. Known without opening the file.
///
/// ```swift
/// for database in try DatabaseSelection.all.databases(inKeysFileAt: "Keys") {
///     if let age = KeyAge(database), age.tooOld { print("\(database.path): make a new key") }
/// }
/// ```
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

    /// The age of `database`'s current key at `now`, or `nil` when its key list could not be built.
    public init?(_ database: FleetDatabase, now: Date = Date()) {
        guard case .success(let keys) = database.keys else { return nil }
        self.init(path: database.path, keys: keys, maximumDays: database.maximumKeyAgeDays, now: now)
    }

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
