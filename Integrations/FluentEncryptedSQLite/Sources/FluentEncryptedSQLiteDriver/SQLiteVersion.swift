import SQLKit
import EncryptedSQLite

/// A SQLite version, such as the one linked into this process (`3.15.2` under SQLCipher 3.4.1,
/// `3.46.1` under SQLCipher 4.6.1), compared part by part.
///
/// ```swift
/// if SQLiteVersion.linked >= SQLiteVersion(3, 35, 0) { /* RETURNING works */ }
/// ```
public struct SQLiteVersion: SQLDatabaseReportedVersion, CustomStringConvertible {
    /// The major, minor and patch numbers.
    public let major: Int, minor: Int, patch: Int

    /// A version from its three numbers.
    public init(_ major: Int, _ minor: Int, _ patch: Int) {
        (self.major, self.minor, self.patch) = (major, minor, patch)
    }

    /// Parses a dotted version such as `3.15.2` (missing or unreadable parts count as 0).
    public init(parsing text: String) {
        let parts = text.split(separator: ".").map { Int($0) ?? 0 } + [0, 0, 0]
        self.init(parts[0], parts[1], parts[2])
    }

    /// The SQLite version of the libsqlcipher this process links.
    public static let linked = SQLiteVersion(parsing: SQLiteFeature.linkedVersion)

    /// `major.minor.patch`.
    public var stringValue: String { "\(major).\(minor).\(patch)" }

    /// `major.minor.patch`.
    public var description: String { stringValue }

    /// `true` when both are ``SQLiteVersion``s with the same numbers.
    public func isEqual(to otherVersion: any SQLDatabaseReportedVersion) -> Bool {
        guard let other = otherVersion as? SQLiteVersion else { return false }
        return (major, minor, patch) == (other.major, other.minor, other.patch)
    }

    /// `true` when `otherVersion` is a newer ``SQLiteVersion``.
    public func isOlder(than otherVersion: any SQLDatabaseReportedVersion) -> Bool {
        guard let other = otherVersion as? SQLiteVersion else { return false }
        return (major, minor, patch) < (other.major, other.minor, other.patch)
    }
}
