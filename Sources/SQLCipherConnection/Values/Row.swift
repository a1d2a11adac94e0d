/// The column names of a result set, shared by all of its rows.
final class ColumnLayout: Sendable {
    let names: [String]
    private let exact: [String: Int]
    private let folded: [String: Int]

    init(names: [String]) {
        self.names = names
        var exact: [String: Int] = [:]
        var folded: [String: Int] = [:]
        for (index, name) in names.enumerated().reversed() {
            exact[name] = index
            folded[name.lowercased()] = index
        }
        self.exact = exact
        self.folded = folded
    }

    /// The leftmost column with this name; exact match first, then case-insensitive as in SQL.
    ///
    /// Result sets are usually narrow: up to 16 columns, comparing the names in order is cheaper
    /// than hashing the name (short names compare as two machine words).
    func index(of name: String) -> Int? {
        if names.count <= 16 {
            for index in names.indices where names[index] == name { return index }
        } else if let index = exact[name] {
            return index
        }
        return folded[name.lowercased()]
    }
}

/// One row of a query result: its values with typed access by index or column name.
///
/// ```swift
/// for row in try db.query("SELECT id, name FROM users") {
///     let id: Int64 = try row.get(0)
///     let name: String? = try row.get("name")
/// }
/// ```
public struct Row: Sendable, Equatable, CustomStringConvertible {
    let layout: ColumnLayout
    /// The values, in column order.
    public let values: [DatabaseValue]

    init(layout: ColumnLayout, values: [DatabaseValue]) {
        self.layout = layout
        self.values = values
    }

    /// The column names, in order.
    public var columnNames: [String] { layout.names }

    /// The number of columns.
    public var count: Int { values.count }

    /// The value at a column index. Traps when out of range, like an array.
    public subscript(index: Int) -> DatabaseValue { values[index] }

    /// The value of the named column (case-insensitive), or `nil` when there is no such column.
    public subscript(column: String) -> DatabaseValue? {
        layout.index(of: column).map { values[$0] }
    }

    /// The value at `index` converted to `T`.
    ///
    /// Ask for an `Optional` type to accept `NULL`.
    /// - Throws: ``StatementError/columnIndexOutOfRange(index:count:)``, or
    ///   ``StatementError/typeMismatch(column:expected:found:)`` when the value does not convert.
    public func get<T: DatabaseValueConvertible>(_ index: Int, as type: T.Type = T.self) throws -> T {
        guard values.indices.contains(index) else {
            throw StatementError.columnIndexOutOfRange(index: index, count: values.count)
        }
        return try convert(values[index], column: layout.names[index])
    }

    /// The value of the named column (case-insensitive) converted to `T`.
    ///
    /// Ask for an `Optional` type to accept `NULL`.
    /// - Throws: ``StatementError/noSuchColumn(name:available:)``, or
    ///   ``StatementError/typeMismatch(column:expected:found:)`` when the value does not convert.
    public func get<T: DatabaseValueConvertible>(_ column: String, as type: T.Type = T.self) throws -> T {
        guard let index = layout.index(of: column) else {
            throw StatementError.noSuchColumn(name: column, available: layout.names)
        }
        return try convert(values[index], column: layout.names[index])
    }

    /// The row as a dictionary from column name to value. When two columns share a name, the
    /// leftmost wins.
    public var dictionary: [String: DatabaseValue] {
        var result: [String: DatabaseValue] = [:]
        for (name, value) in zip(layout.names, values).reversed() { result[name] = value }
        return result
    }

    /// `[name: value, …]` in column order.
    public var description: String {
        "[" + zip(layout.names, values).map { "\($0): \($1)" }.joined(separator: ", ") + "]"
    }

    /// Rows are equal when their column names and values are equal.
    public static func == (lhs: Row, rhs: Row) -> Bool {
        lhs.values == rhs.values && lhs.layout.names == rhs.layout.names
    }

    private func convert<T: DatabaseValueConvertible>(_ value: DatabaseValue, column: String) throws -> T {
        guard let converted = T(databaseValue: value) else {
            throw StatementError.typeMismatch(column: column, expected: String(describing: T.self), found: value.storageClassName)
        }
        return converted
    }
}

extension DatabaseValue {
    /// `NULL`, `INTEGER`, `REAL`, `TEXT` or `BLOB`.
    var storageClassName: String {
        switch self {
        case .null: return "NULL"
        case .integer: return "INTEGER"
        case .real: return "REAL"
        case .text: return "TEXT"
        case .blob: return "BLOB"
        }
    }
}
