import CSQLCipher

extension Statement {
    /// The current row, after ``step()`` returned `true`.
    public var row: Row {
        let layout = self.layout
        var values: [DatabaseValue] = []
        values.reserveCapacity(layout.names.count)
        for index in 0..<Int32(layout.names.count) { values.append(value(at: index)) }
        return Row(layout: layout, values: values)
    }

    /// The current row's value at a column index, without building a ``Row``.
    public func value(at index: Int32) -> DatabaseValue {
        DatabaseValue(sqliteValue: sqlite3_column_value(handle, index))
    }

    /// The current row's integer at a column index (SQLite's conversion rules apply; `NULL` is 0).
    public func int64(at index: Int32) -> Int64 { sqlite3_column_int64(handle, index) }

    /// The current row's real at a column index (SQLite's conversion rules apply; `NULL` is 0).
    public func double(at index: Int32) -> Double { sqlite3_column_double(handle, index) }

    /// The current row's text at a column index (SQLite's conversion rules apply; `NULL` is "").
    public func text(at index: Int32) -> String {
        guard let base = sqlite3_column_text(handle, index) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, index))
        return String(decoding: UnsafeBufferPointer(start: base, count: count), as: UTF8.self)
    }

    /// `true` when the current row's value at a column index is `NULL`.
    public func isNull(at index: Int32) -> Bool { sqlite3_column_type(handle, index) == SQLITE_NULL }

    /// The column a row's request for `name` reads (by a name getter or by decoding), or `nil`
    /// when there is none: exact match first, then case-insensitive. The answers are kept across
    /// rows (``ColumnRequestCache``); each step starts a new row of requests.
    @inlinable @inline(__always)
    func column(forRequest name: String) -> Int? {
        if let cached = columnRequests.next(name) { return cached < 0 ? nil : cached }
        return lookUpColumn(forRequest: name)
    }

    /// ``column(forRequest:)`` when the cache missed: looks the name up and records it.
    @usableFromInline
    func lookUpColumn(forRequest name: String) -> Int? {
        let found = layout.index(of: name)
        columnRequests.record(name, column: found ?? -1)
        return found
    }

    /// The current row's value at `column` (in range) converted to `T`, or `nil` together with
    /// the value when it does not convert, for in-place decoding. (``StatementRow/get(_:as:)-(Int,_)``
    /// spells the same steps out and throws directly, which is cheaper there than returning the
    /// pair.) Always inlined, so that it is compiled for each caller's concrete type.
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
}
