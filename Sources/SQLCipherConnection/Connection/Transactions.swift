import CSQLCipher

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

    /// The statement that begins such a transaction (a literal: the statement cache is keyed by it).
    var beginSQL: String {
        switch self {
        case .deferred: return "BEGIN DEFERRED TRANSACTION"
        case .immediate: return "BEGIN IMMEDIATE TRANSACTION"
        case .exclusive: return "BEGIN EXCLUSIVE TRANSACTION"
        }
    }
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
        // BEGIN and COMMIT run as cached statements: parsed once per connection, not once per
        // transaction (Benchmarks/README.md, issue 24).
        try cachedStatement(kind.beginSQL).execute()
        let result: T
        do {
            result = try body(self)
        } catch {
            rollbackIfOpen()
            throw error
        }
        do {
            try cachedStatement("COMMIT TRANSACTION").execute()
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
        let name = SavepointName(depth: savepointDepth)
        defer { savepointDepth -= 1 }
        try cachedStatement(name.savepointSQL).execute()
        let result: T
        do {
            result = try body(self)
        } catch {
            // A failed statement can have ended the whole transaction already (e.g. SQLITE_FULL).
            if isInTransaction {
                try? execute("ROLLBACK TRANSACTION TO SAVEPOINT \(name.text)")
                try? execute("RELEASE SAVEPOINT \(name.text)")
            }
            throw error
        }
        do {
            try cachedStatement(name.releaseSQL).execute()
        } catch {
            if isInTransaction {
                try? execute("ROLLBACK TRANSACTION TO SAVEPOINT \(name.text)")
                try? execute("RELEASE SAVEPOINT \(name.text)")
            }
            throw error
        }
        return result
    }

    /// `true` when the open transaction holds deferred foreign key violations, which would make its
    /// `COMMIT` fail.
    package var hasDeferredForeignKeyViolations: Bool {
        var current: Int32 = 0
        var highest: Int32 = 0
        return sqlite3_db_status(handle, SQLITE_DBSTATUS_DEFERRED_FKS, &current, &highest, 0) == SQLITE_OK && current > 0
    }

    /// Rolls back the open transaction, if there is one; errors are ignored (SQLite may have
    /// rolled it back itself).
    func rollbackIfOpen() {
        if isInTransaction { try? execute("ROLLBACK TRANSACTION") }
    }
}

/// The name of the savepoint at one nesting depth, and its statements: one text per depth, so the
/// statement cache holds a few statements however many savepoints run.
struct SavepointName {
    let text: String
    init(depth: Int) { text = "encryptedsqlite_savepoint_\(depth)" }
    var savepointSQL: String { "SAVEPOINT \(text)" }
    var releaseSQL: String { "RELEASE SAVEPOINT \(text)" }
}

extension SQLiteError {
    /// The error a `COMMIT` gives when deferred foreign keys are left violated
    /// (`SQLITE_CONSTRAINT_FOREIGNKEY`, a macro Swift does not import).
    package static var deferredForeignKeyViolation: SQLiteError {
        SQLiteError(code: ResultCode(rawValue: SQLITE_CONSTRAINT | (3 << 8)), message: "FOREIGN KEY constraint failed", sql: "COMMIT TRANSACTION")
    }
}
