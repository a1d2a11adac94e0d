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
}

extension Statement {
    /// The current row's value at `column` (in range) converted to `T`, or `nil` together with
    /// the value when it does not convert, for in-place decoding. (``StatementRow/get(_:as:)-(Int,_)``
    /// spells the same steps out and throws directly: returning the pair there cost fetching by
    /// index 1.5% more instructions, measured with callgrind.) Always inlined, so that it is
    /// compiled for each caller's concrete type.
    @inlinable @inline(__always)
    func convertedValue<T: DatabaseValueConvertible>(at column: Int32, to type: T.Type) -> (T?, DatabaseValue?) {
        let value = sqlite3_column_value(handle, column)
        if let native = Self.nativeValue(T.self, value) { return (native, nil) }
        let general = DatabaseValue(sqliteValue: value)
        guard let converted = T(databaseValue: general) else { return (nil, general) }
        return (converted, nil)
    }

    /// The error for a column name the statement's rows do not have.
    @usableFromInline
    func noSuchColumn(_ name: String) -> StatementError {
        StatementError.noSuchColumn(name: name, available: layout.names)
    }

    /// The value of an `sqlite3_value` for the types rows are mostly read into, when its storage
    /// class is the one the type reads without conversion; `nil` sends the caller to the general
    /// path (``DatabaseValue`` and `init(databaseValue:)`), which gives the same results.
    /// Specialized for a concrete `T`, all but one branch fold away.
    @inlinable @inline(__always)
    static func nativeValue<T>(_ type: T.Type, _ value: OpaquePointer?) -> T? {
        switch sqlite3_value_type(value) {
        case SQLITE_INTEGER:
            if T.self == Int64.self { return unsafeBitCast(sqlite3_value_int64(value), to: T.self) }
            if T.self == Int.self, Int.bitWidth == 64 { return unsafeBitCast(Int(truncatingIfNeeded: sqlite3_value_int64(value)), to: T.self) }
            if T.self == Int64?.self { return unsafeBitCast(Int64?.some(sqlite3_value_int64(value)), to: T.self) }
            if T.self == Int?.self, Int.bitWidth == 64 { return unsafeBitCast(Int?.some(Int(truncatingIfNeeded: sqlite3_value_int64(value))), to: T.self) }
            if T.self == Bool.self { return unsafeBitCast(sqlite3_value_int64(value) != 0, to: T.self) }
        case SQLITE_FLOAT:
            if T.self == Double.self { return unsafeBitCast(sqlite3_value_double(value), to: T.self) }
            if T.self == Double?.self { return unsafeBitCast(Double?.some(sqlite3_value_double(value)), to: T.self) }
        case SQLITE_TEXT:
            if T.self == String.self { return unsafeBitCast(string(from: value), to: T.self) }
            if T.self == String?.self { return unsafeBitCast(String?.some(string(from: value)), to: T.self) }
        default:
            break
        }
        return nil
    }

    /// The text of an `sqlite3_value` (its UTF-8 bytes, length from SQLite: no `strlen`).
    @usableFromInline
    static func string(from value: OpaquePointer?) -> String {
        guard let text = sqlite3_value_text(value) else { return "" }
        return String(decoding: UnsafeBufferPointer(start: text, count: Int(sqlite3_value_bytes(value))), as: UTF8.self)
    }

    /// The error for a value at `index` that does not convert to `expected`.
    @usableFromInline
    func typeMismatch(at index: Int, expected: Any.Type, found value: DatabaseValue) -> StatementError {
        StatementError.typeMismatch(column: layout.names[index], expected: String(describing: expected), found: value.storageClassName)
    }

    // MARK: Binding without building StatementArguments

    /// Resets the statement and binds `values` to its parameters in order (slot 1, 2, …), without
    /// building ``StatementArguments``: for statements run many times with typed values. Text and
    /// blobs are bound in place from a buffer the statement reuses, not copied one by one.
    ///
    /// ```swift
    /// let insert = try db.prepare("INSERT INTO items(id, name, score) VALUES (?, ?, ?)")
    /// for item in items { try insert.execute(values: item.id, item.name, item.score) }
    /// ```
    /// - Throws: ``StatementError/argumentCountMismatch(expected:given:sql:)`` unless there is
    ///   exactly one value per parameter slot; ``SQLiteError`` when SQLite refuses a value (then
    ///   every parameter is `NULL`).
    @inlinable @inline(__always)
    public func bind<each Value: DatabaseValueConvertible>(values: repeat each Value) throws {
        var given: Int32 = 0
        for _ in repeat each values { given += 1 }
        try bind(count: given) { statement in
            var slot: Int32 = 0
            for value in repeat each values {
                slot += 1
                try statement.bindValue(value, at: slot)
            }
        }
    }

    /// Binds `count` values with `bindAll` (which binds slots 1…count): checks the count against
    /// the statement's parameters first, and after a failure leaves every parameter `NULL`.
    @inlinable @inline(__always)
    func bind(count given: Int32, _ bindAll: (Statement) throws -> Void) throws {
        let expected = sqlite3_bind_parameter_count(handle)
        guard given == expected else {
            throw StatementError.argumentCountMismatch(expected: Int(expected), given: Int(given), sql: sql)
        }
        startBinding()
        do {
            try bindAll(self)
        } catch {
            bindingFailed()
            throw error
        }
    }

    // Swift runs through a parameter pack at run time, element by element through its generic
    // witnesses (about 130 instructions per value with Swift 6.3, more than SQLite's own bind).
    // Statements with up to three parameters, the common case, get overloads without a pack;
    // they behave exactly like the pack versions.

    /// ``execute(values:)`` for one value, without a parameter pack.
    /// - Throws: ``StatementError`` or ``SQLiteError``.
    @inlinable
    public func execute<A: DatabaseValueConvertible>(values a: A) throws {
        try run { try $0.bind(count: 1) { try $0.bindValue(a, at: 1) } }
    }

    /// ``execute(values:)-(Value)`` for two values, without a parameter pack.
    /// - Throws: ``StatementError`` or ``SQLiteError``.
    @inlinable
    public func execute<A: DatabaseValueConvertible, B: DatabaseValueConvertible>(values a: A, _ b: B) throws {
        try run { try $0.bind(count: 2) { try $0.bindValue(a, at: 1); try $0.bindValue(b, at: 2) } }
    }

    /// ``execute(values:)-(Value)`` for three values, without a parameter pack.
    /// - Throws: ``StatementError`` or ``SQLiteError``.
    @inlinable
    public func execute<A: DatabaseValueConvertible, B: DatabaseValueConvertible, C: DatabaseValueConvertible>(values a: A, _ b: B, _ c: C) throws {
        try run { try $0.bind(count: 3) { try $0.bindValue(a, at: 1); try $0.bindValue(b, at: 2); try $0.bindValue(c, at: 3) } }
    }

    /// ``fetchOne(values:transform:)`` for one value (a lookup by key), without a parameter pack.
    /// - Throws: ``StatementError``, ``SQLiteError``, or what `transform` throws.
    @inlinable
    public func fetchOne<A: DatabaseValueConvertible, T>(values a: A, transform: (StatementRow) throws -> T) throws -> T? {
        try bind(count: 1) { try $0.bindValue(a, at: 1) }
        return try firstRow(transform)
    }

    /// Binds with `bindValues`, runs the statement to completion ignoring any rows, and resets it.
    @inlinable @inline(__always)
    func run(binding bindValues: (Statement) throws -> Void) throws {
        try bindValues(self)
        while try step() {}
        reset()
    }

    /// The first row from the statement's current position converted by `transform`, or `nil`;
    /// resets the statement afterwards.
    @inlinable @inline(__always)
    func firstRow<T>(_ transform: (StatementRow) throws -> T) throws -> T? {
        defer { reset() }
        return try step() ? transform(StatementRow(statement: self)) : nil
    }

    /// Resets the statement, binds `values` (see ``bind(values:)``) and runs it to completion,
    /// ignoring any rows; then resets it again.
    /// - Throws: ``StatementError`` or ``SQLiteError``.
    @inlinable
    public func execute<each Value: DatabaseValueConvertible>(values: repeat each Value) throws {
        try run { try $0.bind(values: repeat each values) }
    }

    // MARK: Reading rows in place

    /// Runs the statement from the start with its current bindings and calls `body` with each
    /// row, read in place; then resets the statement (bindings are kept).
    /// - Throws: what `body` throws, or ``SQLiteError``.
    @inlinable
    public func forEachRow(_ body: (StatementRow) throws -> Void) throws {
        if needsReset { reset() }
        defer { reset() }
        let row = StatementRow(statement: self)
        while try step() { try body(row) }
    }

    /// Resets the statement, binds `values` (see ``bind(values:)``) and returns every row,
    /// converted by `transform` from the row read in place.
    ///
    /// ```swift
    /// let names = try statement.fetchAll(values: minimumScore) { row in try row.get("name", as: String.self) }
    /// ```
    /// - Throws: ``StatementError``, ``SQLiteError``, or what `transform` throws.
    @inlinable
    public func fetchAll<each Value: DatabaseValueConvertible, T>(
        values: repeat each Value, transform: (StatementRow) throws -> T
    ) throws -> [T] {
        try bind(values: repeat each values)
        return try mapRows(transform)
    }

    /// Resets the statement, binds `values` (see ``bind(values:)``) and returns the first row
    /// converted by `transform`, or `nil` when there is none; then resets the statement.
    ///
    /// ```swift
    /// let lookup = try db.cachedStatement("SELECT id, name FROM items WHERE id = ?")
    /// let name = try lookup.fetchOne(values: id) { row in try row.get(1, as: String.self) }
    /// ```
    /// - Throws: ``StatementError``, ``SQLiteError``, or what `transform` throws.
    @inlinable
    public func fetchOne<each Value: DatabaseValueConvertible, T>(
        values: repeat each Value, transform: (StatementRow) throws -> T
    ) throws -> T? {
        try bind(values: repeat each values)
        return try firstRow(transform)
    }

    /// Every row from the statement's current position, converted by `transform`; resets the
    /// statement afterwards (and when `transform` throws).
    @inlinable
    func mapRows<T>(_ transform: (StatementRow) throws -> T) throws -> [T] {
        defer { reset() }
        let row = StatementRow(statement: self)
        var result: [T] = []
        while try step() { result.append(try transform(row)) }
        return result
    }
}

extension Connection {
    /// Runs a query and returns all of its rows, each converted by `transform` from the row read
    /// in place (no ``Row`` is built).
    ///
    /// ```swift
    /// let items = try db.query("SELECT id, name FROM items WHERE score > ?", [1.5]) { row in
    ///     Item(id: try row.get(0), name: try row.get("name"))
    /// }
    /// ```
    /// - Throws: ``SQLiteError``, ``StatementError``, or what `transform` throws.
    @inlinable
    public func query<T>(_ sql: String, _ arguments: StatementArguments = StatementArguments(), _ transform: (StatementRow) throws -> T) throws -> [T] {
        let statement = try prepare(sql)
        try statement.bind(arguments)
        return try statement.mapRows(transform)
    }

    /// Runs a query and returns its first row converted by `transform`, or `nil` when it returns
    /// no row.
    /// - Throws: ``SQLiteError``, ``StatementError``, or what `transform` throws.
    @inlinable
    public func queryOne<T>(_ sql: String, _ arguments: StatementArguments = StatementArguments(), _ transform: (StatementRow) throws -> T) throws -> T? {
        let statement = try prepare(sql)
        try statement.bind(arguments)
        defer { statement.reset() }
        return try statement.step() ? transform(StatementRow(statement: statement)) : nil
    }
}

