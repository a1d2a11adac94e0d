import Foundation

/// SQL identifiers (table, column and index names) quoted for SQL text.
///
/// Names read from `sqlite_master` or given by a ``TableRecord`` can hold any character, so SQL
/// built from them quotes every name:
///
/// ```swift
/// let count = try db.queryValue("SELECT count(*) FROM \(SQLIdentifier.quoted(table))", as: Int64.self)
/// ```
package enum SQLIdentifier {
    /// `name` in double quotes, with each double quote in it doubled: SQLite reads the result as
    /// exactly the identifier `name`, never as a keyword, a string or more SQL.
    package static func quoted(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
