import Foundation
import SQLCipherConnection

/// One schema change: an identifier that orders it, an up step, and optionally a down step.
///
/// Make migrations with ``DatabaseMigrator/registerMigration(_:up:down:)`` (Swift code),
/// ``DatabaseMigrator/registerSQLMigration(_:sql:)`` (SQL text) or
/// ``DatabaseMigrator/registerSQLMigrations(in:)`` (a folder of `.sql` files).
///
/// ```swift
/// for migration in migrator.migrations where !migration.isReversible {
///     print("\(migration) has no down step")
/// }
/// ```
public struct Migration: Sendable, CustomStringConvertible {
    /// What runs for each direction.
    enum Body: Sendable {
        case swift(up: @Sendable (Connection) throws -> Void, down: (@Sendable (Connection) throws -> Void)?)
        case sql(up: String, down: String?)
    }

    /// The identifier, unique in its migrator; migrations run in identifier order (a leading
    /// number compares numerically: `2_x` runs before `10_y`).
    public let identifier: String
    /// The file a SQL migration was read from, if any.
    public let sourceFile: String?
    /// The checksum of a SQL migration's text, recorded when it is applied; `nil` for Swift code.
    public let checksum: String?
    let body: Body

    /// `true` when the migration has a down step.
    public var isReversible: Bool {
        switch body {
        case .swift(_, let down): return down != nil
        case .sql(_, let down): return down != nil
        }
    }

    /// The identifier, and the file for SQL migrations.
    public var description: String { sourceFile.map { "\(identifier) (\($0))" } ?? identifier }

    func runUp(_ db: Connection) throws {
        switch body {
        case .swift(let up, _): try up(db)
        case .sql(let up, _): try db.execute(up)
        }
    }

    func runDown(_ db: Connection) throws {
        switch body {
        case .swift(_, let down): try down?(db)
        case .sql(_, let down): if let down { try db.execute(down) }
        }
    }
}

/// Orders migration identifiers: a leading run of ASCII digits compares as a number, the rest as text.
enum MigrationOrder {
    static func precedes(_ lhs: String, _ rhs: String) -> Bool {
        let (leftNumber, leftRest) = split(lhs)
        let (rightNumber, rightRest) = split(rhs)
        switch (leftNumber, rightNumber) {
        case let (left?, right?) where left != right:
            // Compare arbitrarily long digit strings numerically without overflow.
            let a = String(left.drop(while: { $0 == "0" })), b = String(right.drop(while: { $0 == "0" }))
            if a.count != b.count { return a.count < b.count }
            if a != b { return a < b }
            return left < right
        case (nil, _?): return false
        case (_?, nil): return true
        default: return leftRest == rightRest ? lhs < rhs : leftRest < rightRest
        }
    }

    private static func split(_ identifier: String) -> (Substring?, Substring) {
        // ASCII digits only: other numerals (½, ١٢, Ⅻ) would compare as text, not as numbers.
        let digits = identifier.prefix { $0.isASCII && $0.isNumber }
        return (digits.isEmpty ? nil : digits, identifier.dropFirst(digits.count))
    }
}

/// A content checksum for SQL migrations (FNV-1a, 64 bits). It detects edits of an applied
/// migration's file; it is not a security feature.
enum MigrationChecksum {
    static func of(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return "fnv1a64:" + String(hash, radix: 16)
    }
}
