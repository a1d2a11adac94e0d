extension Connection {
    /// Runs a query and returns all of its rows.
    /// - Throws: ``SQLiteError`` or ``StatementError``.
    public func query(_ sql: String, _ arguments: StatementArguments = StatementArguments()) throws -> [Row] {
        try prepare(sql).fetchAll(arguments)
    }

    /// Runs a query and returns its first row, or `nil` when it returns none.
    /// - Throws: ``SQLiteError`` or ``StatementError``.
    public func queryOne(_ sql: String, _ arguments: StatementArguments = StatementArguments()) throws -> Row? {
        try prepare(sql).fetchOne(arguments)
    }

    /// Runs a query and returns the first column of its first row converted to `T`, or `nil`
    /// when there is no row or the value is `NULL`.
    /// - Throws: ``SQLiteError``, or ``StatementError`` when the value does not convert.
    public func queryValue<T: DatabaseValueConvertible>(
        _ sql: String, _ arguments: StatementArguments = StatementArguments(), as type: T.Type = T.self
    ) throws -> T? {
        guard let row = try queryOne(sql, arguments) else { return nil }
        return try row.get(0, as: T?.self)
    }

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

    /// Runs a query and decodes every row into `T` (see ``Row/decode(_:)``), reading the columns
    /// in place: no ``Row`` is built, and each coding key's column is looked up once per query.
    /// - Throws: ``SQLiteError``, ``StatementError``, or `DecodingError`.
    @inlinable
    public func query<T: Decodable>(_ type: T.Type, _ sql: String, _ arguments: StatementArguments = StatementArguments()) throws -> [T] {
        let statement = try cachedStatement(sql)
        try statement.bind(arguments)
        return try statement.mapRows { try $0.decode(T.self) }
    }
}
