/// How a transaction takes its locks (SQLite's `BEGIN DEFERRED | IMMEDIATE | EXCLUSIVE`).
///
/// ```swift
/// try db.transaction(.immediate) { db in
///     try db.execute("UPDATE accounts SET balance = balance - 10 WHERE id = ?", [1])
/// }
/// ```
public enum TransactionKind: String, Sendable {
    /// Locks are taken when the transaction first reads or writes.
    case deferred = "DEFERRED"
    /// The write lock is taken at once, so the transaction cannot fail later with `SQLITE_BUSY`
    /// on its first write. Use it for transactions that write.
    case immediate = "IMMEDIATE"
    /// The write lock is taken at once, and (outside WAL mode) readers are shut out too.
    case exclusive = "EXCLUSIVE"
}

extension Connection {
    /// `true` while a transaction is open on this connection.
    public var isInTransaction: Bool { !isAutocommit }

    /// Runs `body` in a transaction: commits when it returns, rolls back when it throws.
    ///
    /// Inside another transaction this becomes a savepoint (see ``savepoint(_:)``), so that
    /// transactional code composes: a failure rolls back only its own work, and the outer
    /// transaction stays usable.
    ///
    /// - Parameters:
    ///   - kind: How the transaction locks the database (ignored when nested).
    ///   - body: The work; its return value is returned.
    /// - Returns: What `body` returned.
    /// - Throws: `body`'s error, unchanged, after rolling back; or ``SQLiteError`` when the
    ///   transaction cannot begin (e.g. ``ResultCode/busy``) or commit.
    public func transaction<T>(_ kind: TransactionKind = .deferred, _ body: (Connection) throws -> T) throws -> T {
        if isInTransaction { return try savepoint(body) }
        try execute("BEGIN \(kind.rawValue) TRANSACTION")
        let result: T
        do {
            result = try body(self)
        } catch {
            rollbackIfOpen()
            throw error
        }
        do {
            try execute("COMMIT TRANSACTION")
        } catch {
            rollbackIfOpen()
            throw error
        }
        return result
    }

    /// Runs `body` inside a savepoint: releases it when `body` returns, rolls back to it (and
    /// releases it) when `body` throws. Works inside or outside a transaction; outside one, the
    /// savepoint acts as a deferred transaction.
    ///
    /// - Returns: What `body` returned.
    /// - Throws: `body`'s error, unchanged, after rolling back to the savepoint; or
    ///   ``SQLiteError`` when the savepoint cannot be created or released.
    public func savepoint<T>(_ body: (Connection) throws -> T) throws -> T {
        savepointDepth += 1
        let name = "encryptedsqlite_savepoint_\(savepointDepth)"
        defer { savepointDepth -= 1 }
        try execute("SAVEPOINT \(name)")
        let result: T
        do {
            result = try body(self)
        } catch {
            // A failed statement can have ended the whole transaction already (e.g. SQLITE_FULL).
            if isInTransaction {
                try? execute("ROLLBACK TRANSACTION TO SAVEPOINT \(name)")
                try? execute("RELEASE SAVEPOINT \(name)")
            }
            throw error
        }
        do {
            try execute("RELEASE SAVEPOINT \(name)")
        } catch {
            if isInTransaction {
                try? execute("ROLLBACK TRANSACTION TO SAVEPOINT \(name)")
                try? execute("RELEASE SAVEPOINT \(name)")
            }
            throw error
        }
        return result
    }

    /// Rolls back the open transaction, if there is one; errors are ignored (SQLite may have
    /// rolled it back itself).
    func rollbackIfOpen() {
        if isInTransaction { try? execute("ROLLBACK TRANSACTION") }
    }
}
