import Foundation
import SQLCipherConnection

/// Writes a database as SQL text — schema and rows, like the sqlite3 shell's `.dump` — that
/// rebuilds the same content when run on an empty database: every table with its rows, then
/// `sqlite_sequence`, indexes, triggers and views in creation order, and `user_version` and
/// `application_id`, all in one transaction.
///
/// The text is the database's content in the clear: treat it like a decrypted copy.
/// Limits: virtual tables are written as their `CREATE VIRTUAL TABLE` statement only, and
/// `sqlite_stat*` tables are left out (run `ANALYZE` after importing).
///
/// ```swift
/// let database = try EncryptedDatabase(path: "app.sqlite", keysFile: "Keys")
/// let sql = try database.read { db in try DatabaseDump.text(of: db) }  // plaintext: handle with care
/// ```
public enum DatabaseDump {
    /// Writes the dump of the database `connection` has open to `output`, line by line.
    /// - Throws: `SQLiteError` when a read fails.
    public static func write(_ connection: Connection, to output: (String) throws -> Void) throws {
        try output("PRAGMA foreign_keys=OFF;")
        try output("BEGIN TRANSACTION;")
        let objects = try connection.query("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid")
        var later: [String] = []
        for object in objects {
            let type = try object.get("type", as: String.self)
            let name = try object.get("name", as: String.self)
            let sql = try object.get("sql", as: String.self)
            guard type == "table" else {
                later.append(sql + ";")
                continue
            }
            if name.hasPrefix("sqlite_stat") || name == "sqlite_sequence" { continue }
            try output(sql + ";")
            if sql.uppercased().hasPrefix("CREATE VIRTUAL TABLE") { continue }
            try rows(of: name, in: connection, to: output)
        }
        if try connection.queryValue("SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_sequence'", as: Int.self) == 1 {
            try output("DELETE FROM sqlite_sequence;")
            try rows(of: "sqlite_sequence", in: connection, to: output)
        }
        for statement in later { try output(statement) }
        try output("PRAGMA user_version=\(try connection.userVersion());")
        try output("PRAGMA application_id=\(try connection.applicationID());")
        try output("COMMIT;")
    }

    /// The whole dump as one string.
    /// - Throws: `SQLiteError` when a read fails.
    public static func text(of connection: Connection) throws -> String {
        var lines: [String] = []
        try write(connection) { lines.append($0) }
        return lines.joined(separator: "\n") + "\n"
    }

    private static func rows(of table: String, in connection: Connection, to output: (String) throws -> Void) throws {
        let quoted = SQLIdentifier.quoted(table)
        let statement = try connection.prepare("SELECT * FROM \(quoted)")
        var values: [String] = []
        while try statement.step() {
            values.removeAll(keepingCapacity: true)
            for column in 0..<Int32(statement.columnCount) {
                values.append(literal(statement.value(at: column)))
            }
            try output("INSERT INTO \(quoted) VALUES(\(values.joined(separator: ",")));")
        }
    }

    /// A SQL literal that reads back as exactly this value.
    static func literal(_ value: DatabaseValue) -> String {
        switch value {
        case .null: return "NULL"
        case .integer(let integer): return String(integer)
        case .real(let real):
            if real.isNaN { return "NULL" }
            if real.isInfinite { return real < 0 ? "-1e999" : "1e999" }
            let text = "\(real)"  // the shortest text that reads back as the same double
            return text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) ? text : text + ".0"
        case .text(let text): return "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
        case .blob(let bytes):
            let digits = Array("0123456789ABCDEF".utf8)
            var hex = [UInt8]()
            hex.reserveCapacity(bytes.count * 2)
            for byte in bytes {
                hex.append(digits[Int(byte >> 4)])
                hex.append(digits[Int(byte & 0x0F)])
            }
            return "X'" + String(decoding: hex, as: UTF8.self) + "'"
        }
    }
}
