import CSQLCipher

/// The current row of a running ``Statement``, read in place: typed access by column index or
/// name, without copying the row into a ``Row``.
///
/// You get one inside the closure of ``Statement/fetchAll(values:transform:)``,
/// ``Statement/fetchOne(values:transform:)-(Value,_)``, ``Statement/forEachRow(_:)``, and of
/// `Connection.query(_:_:_:)` and `Connection.queryOne(_:_:_:)` with a trailing closure.
/// It reads the statement's row *as it is now*: use it inside that closure only, and copy what
/// you need to keep (``row`` copies the whole row).
///
/// ```swift
/// let items = try db.query("SELECT id, name, score FROM items") { row in
///     Item(id: try row.get(0), name: try row.get("name"), score: try row.get(2))
/// }
/// ```
///
/// Conversions and errors are those of `Row.get(_:as:)`: ask for an `Optional` type to
/// accept `NULL`. Column names are matched exactly first, then case-insensitively, as in SQL; the
/// statement remembers which column each name it was asked for is, so rows that ask for the same
/// names cost one string comparison per name.
public struct StatementRow {
    /// The statement whose current row this is.
    public let statement: Statement
    /// The number of columns.
    public let count: Int

    /// A view of `statement`'s current row.
    @usableFromInline
    init(statement: Statement) {
        self.statement = statement
        count = Int(sqlite3_column_count(statement.handle))
    }

    /// The column names, in order.
    public var columnNames: [String] { statement.columnNames }

    /// The index of the leftmost column with this name (exact match first, then
    /// case-insensitive), or `nil` when there is none.
    public func columnIndex(of name: String) -> Int? { statement.layout.index(of: name) }

    /// The value at a column index. Traps when out of range, like an array.
    public subscript(index: Int) -> DatabaseValue {
        precondition(index >= 0 && index < count, "column index \(index) out of range 0..<\(count)")
        return statement.value(at: Int32(index))
    }

    /// The value of the named column (exact match first, then case-insensitive), or `nil` when
    /// there is no such column.
    public subscript(column: String) -> DatabaseValue? {
        statement.column(forRequest: column).map { statement.value(at: Int32($0)) }
    }

    /// `true` when the value at a column index is `NULL` (or the index is out of range).
    @inlinable
    public func isNull(_ index: Int) -> Bool {
        sqlite3_column_type(statement.handle, Int32(truncatingIfNeeded: index)) == SQLITE_NULL
    }

    /// The value at `index` converted to `T`.
    ///
    /// Ask for an `Optional` type to accept `NULL`.
    /// - Throws: ``StatementError/columnIndexOutOfRange(index:count:)``, or
    ///   ``StatementError/typeMismatch(column:expected:found:)`` when the value does not convert.
    @inlinable
    public func get<T: DatabaseValueConvertible>(_ index: Int, as type: T.Type = T.self) throws -> T {
        guard index >= 0 && index < count else {
            throw StatementError.columnIndexOutOfRange(index: index, count: count)
        }
        let value = sqlite3_column_value(statement.handle, Int32(truncatingIfNeeded: index))
        if let native = Statement.nativeValue(T.self, value) { return native }
        let general = DatabaseValue(sqliteValue: value)
        guard let converted = T(databaseValue: general) else { throw statement.typeMismatch(at: index, expected: T.self, found: general) }
        return converted
    }

    /// The value of the named column (exact match first, then case-insensitive) converted to `T`.
    ///
    /// Ask for an `Optional` type to accept `NULL`.
    /// - Throws: ``StatementError/noSuchColumn(name:available:)``, or
    ///   ``StatementError/typeMismatch(column:expected:found:)`` when the value does not convert.
    @inlinable
    public func get<T: DatabaseValueConvertible>(_ column: String, as type: T.Type = T.self) throws -> T {
        guard let index = statement.column(forRequest: column) else { throw statement.noSuchColumn(column) }
        return try get(index, as: T.self)
    }

    /// A copy of the whole row, to keep after the statement moves on.
    public var row: Row { statement.row }

    /// Decodes the row into a `Decodable` type, reading the columns in place (see
    /// ``Row/decode(_:)`` for the rules). The statement remembers which column each coding key
    /// read, so decoding many rows looks each name up once.
    /// - Throws: `DecodingError` naming the column when a column is missing or does not convert.
    @inlinable
    public func decode<T: Decodable>(_ type: T.Type = T.self) throws -> T {
        try statement.decodeRow(T.self)
    }

    /// Reads the row into a ``RowDecodable`` type by column position: the same result as the
    /// `Decodable` path, without Codable's dispatch. The statement resolves the type's column
    /// names to indexes once.
    ///
    /// ```swift
    /// try statement.forEachRow { row in
    ///     let player = try row.decode(Player.self)   // struct Player: Codable, RowDecodable
    /// }
    /// ```
    /// - Throws: `DecodingError` naming the column when a column is missing or does not convert.
    @inlinable
    public func decode<T: RowDecodable>(_ type: T.Type = T.self) throws -> T {
        try T(row: self, columns: statement.recordColumns(for: T.self))
    }
}
