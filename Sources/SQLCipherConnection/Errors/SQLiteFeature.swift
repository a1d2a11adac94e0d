import CSQLCipher
import Foundation

/// A SQL feature that SQLite added in some version, recognised in a statement that the linked
/// SQLite rejected, so that the error can say the engine is too old instead of only "syntax error".
///
/// SQLCipher 3.4.1 (Debian 12) carries SQLite 3.15.2, from 2016: it has no `RETURNING`, UPSERT,
/// window functions, `RENAME COLUMN`, `DROP COLUMN`, generated columns, STRICT tables, `->`
/// operators, `iif()` and more. SQLCipher 4.6.1 (Debian 13) carries SQLite 3.46. The list of what
/// each engine lacks is in the Getting Started article.
///
/// ```swift
/// do { try db.execute("INSERT INTO t(a) VALUES (1) RETURNING id") }
/// catch let error as SQLiteError where error.missingFeature != nil {
///     print(error.missingFeature!.name, "needs SQLite", error.missingFeature!.since)
/// }
/// ```
public struct SQLiteFeature: Sendable, Equatable {
    /// What the feature is called in SQLite's documentation, e.g. `RETURNING`.
    public let name: String
    /// The SQLite version that added it, e.g. `3.35.0`.
    public let since: String
    /// Recognises the feature in a failed statement: the statement text (uppercased) and SQLite's
    /// message.
    let appears: @Sendable (_ sql: String, _ message: String) -> Bool

    public static func == (lhs: SQLiteFeature, rhs: SQLiteFeature) -> Bool { lhs.name == rhs.name && lhs.since == rhs.since }

    /// The SQLite version of this process, e.g. `3.15.2`.
    public static let linkedVersion = String(cString: sqlite3_libversion())

    /// The features the linked SQLite lacks that the statement `sql` (which failed with `message`)
    /// uses, the first that fits, or `nil`.
    static func missing(in sql: String, message: String) -> SQLiteFeature? {
        let upper = sql.uppercased()
        return all.first { isNewer($0.since, than: linkedVersion) && $0.appears(upper, message) }
    }

    private static func syntax(_ pattern: String) -> @Sendable (String, String) -> Bool {
        { sql, message in message.contains("syntax error") && sql.range(of: pattern, options: .regularExpression) != nil }
    }

    private static func function(_ names: [String]) -> @Sendable (String, String) -> Bool {
        { _, message in names.contains { message == "no such function: \($0)" } }
    }

    /// The features, each with the version that added it (from SQLite's release history).
    static let all: [SQLiteFeature] = [
        SQLiteFeature(name: "UPSERT (ON CONFLICT … DO)", since: "3.24.0", appears: syntax(#"ON\s+CONFLICT\b[^;]*\bDO\b"#)),
        SQLiteFeature(name: "RETURNING", since: "3.35.0", appears: syntax(#"\bRETURNING\b"#)),
        SQLiteFeature(name: "window functions (OVER, WINDOW)", since: "3.25.0", appears: syntax(#"\bOVER\s*\(|\bOVER\s+\w+|\bWINDOW\s+\w+\s+AS\b"#)),
        SQLiteFeature(name: "ALTER TABLE … RENAME COLUMN", since: "3.25.0", appears: syntax(#"\bALTER\s+TABLE\b.*\bRENAME\s+(COLUMN\s+)?\S+\s+TO\b"#)),
        SQLiteFeature(name: "ALTER TABLE … DROP COLUMN", since: "3.35.0", appears: syntax(#"\bALTER\s+TABLE\b.*\bDROP\b"#)),
        SQLiteFeature(name: "generated columns", since: "3.31.0", appears: syntax(#"\bGENERATED\s+ALWAYS\b|\bCREATE\s+TABLE\b.*\bAS\s*\("#)),
        SQLiteFeature(name: "STRICT tables", since: "3.37.0", appears: syntax(#"\)\s*STRICT\b"#)),
        SQLiteFeature(name: "the -> and ->> operators", since: "3.38.0", appears: syntax(#"->"#)),
        SQLiteFeature(name: "NULLS FIRST / NULLS LAST", since: "3.30.0", appears: syntax(#"\bNULLS\s+(FIRST|LAST)\b"#)),
        SQLiteFeature(name: "FILTER on aggregate functions", since: "3.30.0", appears: syntax(#"\bFILTER\s*\(\s*WHERE\b"#)),
        SQLiteFeature(name: "UPDATE … FROM", since: "3.33.0", appears: syntax(#"^\s*(WITH\b.*)?UPDATE\b.*\bSET\b.*\bFROM\b"#)),
        SQLiteFeature(name: "IS [NOT] DISTINCT FROM", since: "3.39.0", appears: syntax(#"\bIS\s+(NOT\s+)?DISTINCT\s+FROM\b"#)),
        SQLiteFeature(name: "MATERIALIZED common table expressions", since: "3.35.0", appears: syntax(#"\bAS\s+(NOT\s+)?MATERIALIZED\b"#)),
        SQLiteFeature(name: "RIGHT and FULL OUTER JOIN", since: "3.39.0", appears: { _, message in message.contains("RIGHT and FULL OUTER JOINs are not currently supported") }),
        SQLiteFeature(name: "TRUE and FALSE literals", since: "3.23.0", appears: { _, message in message == "no such column: true" || message == "no such column: false" }),
        SQLiteFeature(name: "iif()", since: "3.32.0", appears: function(["iif"])),
        SQLiteFeature(name: "unixepoch()", since: "3.38.0", appears: function(["unixepoch"])),
        SQLiteFeature(name: "format()", since: "3.38.0", appears: function(["format"])),
        SQLiteFeature(name: "built-in JSON functions", since: "3.38.0", appears: { _, message in message.hasPrefix("no such function: json") }),
        SQLiteFeature(name: "built-in math functions", since: "3.35.0", appears: function([
            "acos", "asin", "atan", "atan2", "ceil", "ceiling", "cos", "degrees", "exp", "floor", "ln", "log", "log10", "log2",
            "mod", "pi", "pow", "power", "radians", "sin", "sqrt", "tan", "trunc",
        ])),
    ]

    /// `true` when dotted version `a` is newer than `b` (`3.35.0` > `3.15.2`).
    package static func isNewer(_ a: String, than b: String) -> Bool {
        let parts = { (text: String) in text.split(separator: ".").map { Int($0) ?? 0 } }
        let (x, y) = (parts(a), parts(b))
        for index in 0..<max(x.count, y.count) {
            let (p, q) = (index < x.count ? x[index] : 0, index < y.count ? y[index] : 0)
            if p != q { return p > q }
        }
        return false
    }
}

extension SQLiteError {
    /// The SQL feature this statement uses that the linked SQLite is too old for, when that is
    /// why it failed (only for `SQLITE_ERROR` with the statement's text known).
    public var missingFeature: SQLiteFeature? {
        guard code.primary == .error, let sql else { return nil }
        return SQLiteFeature.missing(in: sql, message: message)
    }
}
