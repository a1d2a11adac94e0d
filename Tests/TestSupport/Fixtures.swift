import EncryptedSQLite
import Foundation

/// The schema and rows the rotation tests put in a database: a table with an index, a trigger
/// and a view, plus `user_version` and `application_id`, so that a test can check that all of it
/// survives.
public enum Fixture {
    /// SQL that creates the fixture schema and `rows` rows.
    public static func sql(rows: Int = 200) -> String {
        var lines = [
            "CREATE TABLE people(id INTEGER PRIMARY KEY, name TEXT NOT NULL, score REAL, photo BLOB, updated INTEGER);",
            "CREATE INDEX people_name ON people(name);",
            "CREATE TABLE audit(id INTEGER PRIMARY KEY, person INTEGER, note TEXT);",
            "CREATE TRIGGER people_audit AFTER UPDATE ON people BEGIN INSERT INTO audit(person, note) VALUES (new.id, 'updated'); END;",
            "CREATE VIEW high_scores AS SELECT name, score FROM people WHERE score > 50;",
            "PRAGMA user_version = 42;",
            "PRAGMA application_id = 1234567;",
            "BEGIN;",
        ]
        for index in 1...rows {
            lines.append("INSERT INTO people(name, score, photo, updated) VALUES ('person \(index) é', \(Double(index) * 0.5), X'\(String(format: "%08x", index * 2_654_435_761 & 0xFFFF_FFFF))', \(index));")
        }
        lines.append("UPDATE people SET updated = updated + 1 WHERE id % 10 = 0;")
        lines.append("COMMIT;")
        return lines.joined(separator: "\n")
    }

    /// Creates the fixture in a new file with the `sqlcipher` shell, in its default format (with
    /// `version3`, in the 3.x format).
    public static func createWithShell(at path: String, key: ShellKey, rows: Int = 200, walMode: Bool = false, version3: Bool = false) throws {
        let mode = walMode ? "PRAGMA journal_mode = WAL;\n" : ""
        let result = try SQLCipherShell.run(path, key: key, version3: version3, mode + sql(rows: rows))
        guard result.status == 0 else { throw FixtureError(message: "sqlcipher shell failed: \(result.stderr)") }
    }

    /// Creates the fixture in a new file through the library, encrypted with the current key of `keys`.
    public static func createWithLibrary(at path: String, keys: KeyList, rows: Int = 200, walMode: Bool = false) throws {
        let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(createIfMissing: true))
        try database.writeWithoutTransaction { db in
            if walMode { _ = try db.queryValue("PRAGMA journal_mode = WAL", as: String.self) }
            try db.execute(sql(rows: rows))
        }
    }

    /// Reads a file's content digest with exactly the given keys, without rotating anything.
    public static func digest(of path: String, with keys: KeyList) throws -> String {
        let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(rotateToCurrentKey: false))
        return try database.read { try contentDigest($0) }
    }

    /// A digest of everything a user would check: every schema object's SQL, every row of every
    /// table in rowid order, `user_version` and `application_id`.
    public static func contentDigest(_ db: Connection) throws -> String {
        var hasher = ContentHasher()
        hasher.add("user_version=\(try db.userVersion()) application_id=\(try db.applicationID())")
        let objects = try db.query("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")
        for object in objects { hasher.add(object.description) }
        for table in objects where (try table.get("type", as: String.self)) == "table" {
            let name = try table.get("name", as: String.self)
            let withoutRowID = (try table.get("sql", as: String?.self) ?? "").uppercased().contains("WITHOUT ROWID")
            let statement = try db.prepare("SELECT * FROM \(SQLIdentifier.quoted(name))" + (withoutRowID ? "" : " ORDER BY rowid"))
            _ = try addRows(of: statement, to: &hasher)
        }
        return hasher.hexDigest
    }

    /// Adds every row `statement` returns, value by value with its storage class, to `hasher`;
    /// returns the number of rows.
    static func addRows(of statement: Statement, to hasher: inout ContentHasher) throws -> Int {
        var rows = 0
        while try statement.step() {
            rows += 1
            for column in 0..<Int32(statement.columnCount) {
                switch statement.value(at: column) {
                case .null: hasher.add("N")
                case .integer(let value): hasher.add("I\(value)")
                case .real(let value): hasher.add("R\(value)")
                case .text(let value): hasher.add("T\(value)")
                case .blob(let bytes): hasher.add(bytes)
                }
            }
        }
        return rows
    }
}

/// A digest of a sequence of strings and byte strings, built on the standard library's SipHash
/// (compiled optimized even in debug builds). It is seeded per process, so digests compare only
/// within one test process, which is all the tests need. Not for security: it detects accidental
/// change of content between two reads.
struct ContentHasher {
    private var hasher = Hasher()

    mutating func add(_ text: String) { hasher.combine(text) }

    mutating func add(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        hasher.combine(bytes.count)
    }

    var hexDigest: String { String(UInt64(bitPattern: Int64(hasher.finalize())), radix: 16) }
}

/// A fixture could not be made.
public struct FixtureError: Error, CustomStringConvertible {
    public let message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}
