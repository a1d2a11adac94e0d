import EncryptedSQLite
import Foundation

/// What a crash checker (kill -9, writer kill, power cut) found in the files one trial left: the
/// outcome the tally counts, and every problem it noticed on the way. The trials record each
/// problem as a test issue; the checkers' control tests hand them files known to be changed or
/// unopenable and assert on both.
public struct CrashVerdict: Sendable, CustomStringConvertible {
    public let outcome: CrashOutcome
    public let problems: [String]

    public init(_ outcome: CrashOutcome, problems: [String]) {
        self.outcome = outcome
        self.problems = problems
    }

    public var description: String { "\(outcome)" + (problems.isEmpty ? "" : ": " + problems.joined(separator: " | ")) }
}

extension Fixture {
    /// A digest of every row of one table, in rowid order (as ``contentDigest(_:)``, for a table
    /// that must stay untouched while others change). Compares within one test process only.
    public static func tableDigest(_ db: Connection, _ table: String) throws -> String {
        var hasher = ContentHasher()
        let statement = try db.prepare("SELECT * FROM \(SQLIdentifier.quoted(table)) ORDER BY rowid")
        let rows = try addRows(of: statement, to: &hasher)
        return "\(rows) rows, \(hasher.hexDigest)"
    }
}

/// Damage for the crash checkers' control tests.
public enum CrashControl {
    /// Overwrites the first `count` bytes of a file (page 1, with its salt or SQLite header) with
    /// random bytes: no key and no shell can open it afterwards.
    public static func overwriteStart(of path: String, count: Int = 1024) throws {
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        var generator = SystemRandomNumberGenerator()
        try handle.write(contentsOf: Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }))
    }
}
