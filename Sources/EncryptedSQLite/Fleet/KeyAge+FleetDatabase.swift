import Foundation

extension KeyAge {
    /// The age of `database`'s current key at `now`, against its `max_key_age_days`, or `nil` when
    /// its key list could not be built.
    ///
    /// ```swift
    /// for database in try DatabaseSelection.all.databases(inKeysFileAt: "Keys") {
    ///     if let age = KeyAge(database), age.tooOld { print("\(database.path): make a new key") }
    /// }
    /// ```
    public init?(_ database: FleetDatabase, now: Date = Date()) {
        guard case .success(let keys) = database.keys else { return nil }
        self.init(path: database.path, keys: keys, maximumDays: database.maximumKeyAgeDays, now: now)
    }
}
