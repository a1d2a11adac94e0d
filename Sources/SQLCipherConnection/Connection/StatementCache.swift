extension Connection {
    /// A prepared statement for `sql`, prepared once and reused on later calls with the same
    /// text; it is reset and its bindings cleared before it is returned.
    ///
    /// Use it for SQL run many times (inserts in a loop, lookups by key) to skip re-parsing.
    /// Do not hold on to the statement across calls that may ask for the same SQL again.
    /// Cached statements keep the connection alive until it is closed; connections the library
    /// hands out are closed when their ``EncryptedDatabase`` goes away.
    /// - Throws: ``SQLiteError`` for invalid SQL.
    public func cachedStatement(_ sql: String) throws -> Statement {
        if let statement = statementCache[sql] {
            statement.reset()
            statement.clearBindings()
            return statement
        }
        let statement = try prepare(sql)
        statementCache[sql] = statement
        return statement
    }

    /// Forgets every cached statement (they are finalized once no caller holds them).
    public func clearStatementCache() {
        statementCache.removeAll()
    }
}
