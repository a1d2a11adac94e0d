import EncryptedSQLite
import FluentKit

// The library cannot depend on FluentKit, so the conformances live here, in the bridge package:
// Fluent code sees the library's own errors, with their messages, as `DatabaseError`s.

/// SQLite's errors as Fluent's `DatabaseError`, unchanged (their description keeps SQLite's
/// message, the statement, and the SQLite feature the linked engine lacks, when that is why).
///
/// ```swift
/// do { try await user.create(on: db) }
/// catch let error as any DatabaseError where error.isConstraintFailure { /* 409 */ }
/// ```
extension SQLiteError: @retroactive DatabaseError {
    /// `true` for `SQLITE_ERROR` (syntax errors, unknown tables and columns, features the linked
    /// SQLite lacks).
    public var isSyntaxError: Bool { code.primary == .error }
    /// `true` for `SQLITE_CONSTRAINT` (unique, not null, foreign key, check).
    public var isConstraintFailure: Bool { code.primary == .constraint }
    /// `true` for `SQLITE_MISUSE` (a statement on a closed connection).
    public var isConnectionClosed: Bool { code.primary == .misuse }
}

/// The library's errors as Fluent's `DatabaseError`: ``EncryptedDatabaseError/closed(path:)``
/// (after shutdown) and ``EncryptedDatabaseError/transactionEnded(path:)`` report a closed
/// connection; none is a syntax or constraint error.
///
/// ```swift
/// catch let error as EncryptedDatabaseError where error.isConnectionClosed { /* 503 */ }
/// ```
extension EncryptedDatabaseError: @retroactive DatabaseError {
    /// `false`: SQL errors are `SQLiteError`s.
    public var isSyntaxError: Bool { false }
    /// `false`: constraint failures are `SQLiteError`s.
    public var isConstraintFailure: Bool { false }
    /// `true` for `.closed` and `.transactionEnded`.
    public var isConnectionClosed: Bool {
        switch self {
        case .closed, .transactionEnded: true
        default: false
        }
    }
}
