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
    /// When `T` turns out to be ``RowDecodable`` (code generic over `Decodable` calling this), its
    /// rows are read by position as the overload for ``RowDecodable`` types reads them.
    ///
    /// ```swift
    /// struct Summary: Decodable { let name: String; let total: Double }
    /// let totals = try db.query(Summary.self, "SELECT name, sum(score) AS total FROM scores GROUP BY name")
    /// ```
    /// - Throws: ``SQLiteError``, ``StatementError``, or `DecodingError`.
    @inlinable
    public func query<T: Decodable>(_ type: T.Type, _ sql: String, _ arguments: StatementArguments = StatementArguments()) throws -> [T] {
        let statement = try cachedStatement(sql)
        try statement.bind(arguments)
        if let recordType = T.self as? any RowDecodable.Type { return try statement.mapRecords(recordType, as: T.self) }
        return try statement.mapRows { try $0.decode(T.self) }
    }

    /// Runs a query and reads every row into a ``RowDecodable`` type by column position, the
    /// column names resolved to indexes once per query: the rows the `Decodable` overload would
    /// give, without Codable's dispatch.
    ///
    /// ```swift
    /// struct Player: Codable { var id: Int64; var name: String; var score: Double? }
    /// extension Player: RowDecodable {
    ///     static var databaseColumnNames: [String] { ["id", "name", "score"] }
    ///     init(row: StatementRow, columns: RowColumns) throws {
    ///         self.id = try columns.decode(0, in: row)
    ///         self.name = try columns.decode(1, in: row)
    ///         self.score = try columns.decode(2, in: row)
    ///     }
    /// }
    /// let best = try db.query(Player.self, "SELECT * FROM players WHERE score > ?", [10])
    /// ```
    /// - Throws: ``SQLiteError``, ``StatementError``, or `DecodingError`.
    @inlinable
    public func query<T: RowDecodable>(_ type: T.Type, _ sql: String, _ arguments: StatementArguments = StatementArguments()) throws -> [T] {
        let statement = try cachedStatement(sql)
        try statement.bind(arguments)
        return try statement.mapRecords(T.self)
    }
}
