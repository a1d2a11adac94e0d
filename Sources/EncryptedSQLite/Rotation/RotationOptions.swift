/// How a key-only rotation (same cipher settings, new key) rewrites the file.
///
/// ```swift
/// var options = OpenOptions()
/// options.rotationStrategy = .engineRekey  // SQLCipher's own rekey instead of page re-encryption
/// ```
public enum RotationStrategy: String, Sendable, Codable, CaseIterable {
    /// The library re-encrypts the pages itself, in parallel, in place, under the database's
    /// EXCLUSIVE lock and a rollback journal in SQLite's format, when the file allows it (HMAC on;
    /// rollback-journal mode, or WAL mode with no other connection); otherwise the engine's rekey.
    case automatic
    /// Always SQLCipher's own `sqlite3_rekey`, in place, one page at a time (several times slower;
    /// works alongside other connections in WAL mode).
    case engineRekey
}

/// What a rotation checks before it reports success.
///
/// ```swift
/// let options = OpenOptions(verification: .integrityCheck)  // slower, reads every page and index
/// ```
public enum RotationVerification: String, Sendable, Codable, CaseIterable {
    /// The schema can be read on a fresh connection with the new key (proves the key; cheap).
    case schema
    /// As `schema`, and every page of the file is read back from disk right after it is written
    /// and compared byte for byte with the page as encrypted and signed with the new key: proves
    /// that every page was rewritten for the new key and reached the file intact, at a fraction
    /// of `quickCheck`'s cost. Done
    /// before the rotation commits, so a failure rolls it back. The default. For rotations the
    /// library does not rewrite itself (the engine's rekey, the export path), `quickCheck` runs
    /// instead. A background copy (``OpenOptions/backgroundRotation``) is only compared with the
    /// database on a fresh connection (page count, schema, `user_version`, `application_id`),
    /// since a check of every page would run inside its pause: choose `quickCheck` or
    /// `integrityCheck` for that check, and row counts, in the pause.
    case pages
    /// `PRAGMA quick_check` by the engine on a fresh connection with the new key: every page of
    /// every table and index is read and authenticated, and the b-tree structure checked (linear
    /// in the file size; several times the cost of `pages`).
    case quickCheck
    /// `PRAGMA integrity_check`: as `quickCheck`, plus index consistency (slowest).
    case integrityCheck
}
