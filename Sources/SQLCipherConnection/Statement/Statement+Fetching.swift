extension Statement {
    /// Resets, binds `arguments` and returns every row.
    /// - Throws: ``StatementError`` or ``SQLiteError``.
    public func fetchAll(_ arguments: StatementArguments = StatementArguments()) throws -> [Row] {
        try bind(arguments)
        defer { reset() }
        var rows: [Row] = []
        while try step() { rows.append(row) }
        return rows
    }

    /// Resets, binds `arguments` and returns the first row, or `nil` when there is none.
    /// - Throws: ``StatementError`` or ``SQLiteError``.
    public func fetchOne(_ arguments: StatementArguments = StatementArguments()) throws -> Row? {
        try bind(arguments)
        defer { reset() }
        return try step() ? row : nil
    }

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

    /// ``fetchOne(values:transform:)`` for one value (a lookup by key), without a parameter pack.
    /// - Throws: ``StatementError``, ``SQLiteError``, or what `transform` throws.
    @inlinable
    public func fetchOne<A: DatabaseValueConvertible, T>(values a: A, transform: (StatementRow) throws -> T) throws -> T? {
        try bind(count: 1) { try $0.bindValue(a, at: 1) }
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

    /// The first row from the statement's current position converted by `transform`, or `nil`;
    /// resets the statement afterwards.
    @inlinable @inline(__always)
    func firstRow<T>(_ transform: (StatementRow) throws -> T) throws -> T? {
        defer { reset() }
        return try step() ? transform(StatementRow(statement: self)) : nil
    }
}
