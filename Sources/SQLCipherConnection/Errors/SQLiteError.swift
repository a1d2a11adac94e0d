import CSQLCipher
import Foundation

/// A SQLite result code (primary or extended), with names for the ones callers act on.
///
/// ```swift
/// if error.code.primary == .busy { scheduleRetry() }
/// ```
public struct ResultCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The numeric code as SQLite defines it.
    public let rawValue: Int32

    /// Wraps a numeric SQLite result code.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The primary code (the low 8 bits of an extended code).
    public var primary: ResultCode { ResultCode(rawValue: rawValue & 0xFF) }

    /// `SQLITE_ERROR`: generic error, such as a syntax error.
    public static let error = ResultCode(rawValue: SQLITE_ERROR)
    /// `SQLITE_PERM`: access permission denied.
    public static let permission = ResultCode(rawValue: SQLITE_PERM)
    /// `SQLITE_BUSY`: the database file is locked by another connection or process.
    public static let busy = ResultCode(rawValue: SQLITE_BUSY)
    /// `SQLITE_LOCKED`: a table is locked by this connection's own open statements.
    public static let locked = ResultCode(rawValue: SQLITE_LOCKED)
    /// `SQLITE_READONLY`: attempt to write a read-only database.
    public static let readOnly = ResultCode(rawValue: SQLITE_READONLY)
    /// `SQLITE_READONLY_ROLLBACK` (an extended code): a hot journal must be rolled back, and this
    /// connection is read-only.
    public static let readOnlyRollback = ResultCode(rawValue: SQLITE_READONLY | (3 << 8))
    /// `SQLITE_IOERR`: a disk I/O error.
    public static let ioError = ResultCode(rawValue: SQLITE_IOERR)
    /// `SQLITE_CORRUPT`: the database disk image is malformed.
    public static let corrupt = ResultCode(rawValue: SQLITE_CORRUPT)
    /// `SQLITE_FULL`: the disk (or a file size limit) is full.
    public static let full = ResultCode(rawValue: SQLITE_FULL)
    /// `SQLITE_CANTOPEN`: the file could not be opened.
    public static let cannotOpen = ResultCode(rawValue: SQLITE_CANTOPEN)
    /// `SQLITE_CONSTRAINT`: a constraint failed.
    public static let constraint = ResultCode(rawValue: SQLITE_CONSTRAINT)
    /// `SQLITE_AUTH`: the statement was denied by the connection's authorizer.
    public static let notAuthorized = ResultCode(rawValue: SQLITE_AUTH)
    /// `SQLITE_NOTADB`: not a database, or encrypted with another key.
    public static let notADatabase = ResultCode(rawValue: SQLITE_NOTADB)
    /// `SQLITE_PROTOCOL`: in WAL mode, SQLite retried taking the WAL's locks for about 10 s while
    /// another connection held them in the middle of a recovery or checkpoint, and gave up.
    public static let lockingProtocol = ResultCode(rawValue: SQLITE_PROTOCOL)
    /// `SQLITE_MISUSE`: the library was used incorrectly.
    public static let misuse = ResultCode(rawValue: SQLITE_MISUSE)

    /// SQLite's own English name for the code, e.g. `database is locked`.
    public var description: String { String(cString: sqlite3_errstr(rawValue)) }
}

/// An error reported by SQLite (through SQLCipher) for one statement or call.
///
/// It carries the result code, SQLite's message and the SQL text it happened on. Argument values
/// are never part of it: bound values can be secrets, and key material is never SQL in this library.
///
/// ```swift
/// do {
///     try db.execute("INSERT INTO users(id, name) VALUES (?, ?)", [1, "Ann"])
/// } catch let error as SQLiteError where error.code.primary == .constraint {
///     print("user 1 exists already")
/// }
/// ```
public struct SQLiteError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The extended result code, e.g. `SQLITE_BUSY_SNAPSHOT`; compare `code.primary` with the
    /// named constants of ``ResultCode``.
    public let code: ResultCode
    /// SQLite's message for the failure.
    public let message: String
    /// The SQL statement that failed, when the failure belongs to one.
    public let sql: String?

    /// Creates an error; the library makes these, tests and wrappers may too.
    public init(code: ResultCode, message: String, sql: String? = nil) {
        self.code = code
        self.message = message
        self.sql = sql
    }

    /// `SQLite error 5 (database is locked): <message> — in: <sql>`, with advice for busy errors
    /// and for statements that use a feature the linked SQLite is too old for (``missingFeature``).
    public var description: String {
        var text = "SQLite error \(code.rawValue) (\(code.primary)): \(message)"
        if code.primary == .busy {
            text += "; another connection or process holds the lock longer than the busy timeout: retry later, or raise the busy timeout"
        }
        if let feature = missingFeature {
            text += "; \(feature.name) needs SQLite \(feature.since), and the linked SQLCipher carries SQLite \(SQLiteFeature.linkedVersion): rewrite the statement without it, or link a newer SQLCipher"
        }
        if let sql { text += " — in: \(sql)" }
        return text
    }

    /// `true` for `SQLITE_BUSY` (and its extended codes): the database was locked by another
    /// connection for longer than the busy timeout.
    public var isBusy: Bool { code.primary == .busy }
}

/// A misuse of the statement and row API that SQLite itself does not report: wrong argument
/// counts, unknown parameter or column names, values that do not convert to the requested type.
///
/// ```swift
/// do {
///     let score: Double = try row.get("score")
/// } catch StatementError.noSuchColumn(let name, let available) {
///     print("no column \(name); the row has \(available)")
/// }
/// ```
public enum StatementError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The statement has `expected` parameters but `given` positional arguments were supplied.
    case argumentCountMismatch(expected: Int, given: Int, sql: String)
    /// The statement has a named parameter for which no argument was given.
    case missingNamedArgument(name: String, sql: String)
    /// A named argument matches no parameter of the statement(s).
    case unusedNamedArgument(name: String, sql: String)
    /// The statement has an unnamed `?` parameter but the arguments are named.
    case unnamedParameterWithNamedArguments(index: Int, sql: String)
    /// The row has no column with that name.
    case noSuchColumn(name: String, available: [String])
    /// The column index is outside the row.
    case columnIndexOutOfRange(index: Int, count: Int)
    /// The column holds a value of a storage class that does not convert to the requested type.
    /// The value itself is not included.
    case typeMismatch(column: String, expected: String, found: String)
    /// The statement text holds no SQL statement.
    case emptyStatement(sql: String)

    /// What went wrong and what to check.
    public var description: String {
        switch self {
        case let .argumentCountMismatch(expected, given, sql):
            return "The statement expects \(expected) argument(s) but \(given) were given — in: \(sql)"
        case let .missingNamedArgument(name, sql):
            return "No argument was given for parameter \(name) — in: \(sql)"
        case let .unusedNamedArgument(name, sql):
            return "The argument \(name) matches no parameter; check its spelling — in: \(sql)"
        case let .unnamedParameterWithNamedArguments(index, sql):
            return "Parameter \(index) is an unnamed '?', but the arguments are named; use :name placeholders or positional arguments — in: \(sql)"
        case let .noSuchColumn(name, available):
            return "No column named \(name.debugDescription); the row has: \(available.joined(separator: ", "))"
        case let .columnIndexOutOfRange(index, count):
            return "Column index \(index) is out of range; the row has \(count) column(s)"
        case let .typeMismatch(column, expected, found):
            return "Column \(column.debugDescription) holds \(found), which does not convert to \(AcceptedForms.describing(expected))"
        case let .emptyStatement(sql):
            return "The SQL text holds no statement: \(sql.debugDescription)"
        }
    }
}

extension SQLiteError {
    /// The error of the last failed call on `handle`, for the given result code.
    static func from(handle: OpaquePointer?, code: Int32, sql: String?) -> SQLiteError {
        let message: String
        if let handle, let text = sqlite3_errmsg(handle) {
            message = String(cString: text)
        } else {
            message = String(cString: sqlite3_errstr(code))
        }
        let extended = handle.map { sqlite3_extended_errcode($0) } ?? code
        // The extended code is only meaningful when its primary part matches the returned code.
        let chosen = (extended & 0xFF) == (code & 0xFF) ? extended : code
        return SQLiteError(code: ResultCode(rawValue: chosen), message: message, sql: sql.map(withoutKeyMaterial))
    }

    /// Stands for SQL text that is not kept in an error because it holds key material.
    static let hiddenSQL = "(SQL not shown: it passes a key as text)"

    /// `sql`, or ``hiddenSQL`` when the statement passes a key as SQL text: `PRAGMA key`,
    /// `rekey`, `hexkey`, `hexrekey` (which the connection refuses), or `ATTACH … KEY` with a
    /// literal instead of a bound parameter. The library never writes such SQL; an application
    /// that does must not see its key repeated in the error.
    static func withoutKeyMaterial(_ sql: String) -> String {
        let text = sql.lowercased()
        let keyPragma = text.contains(/pragma\s+[^=(;]*key/)
        let literalAttachKey = text.contains(/\battach\b/) && text.contains(/\bkey\b\s*[^?:@$\s]/)
        return keyPragma || literalAttachKey ? hiddenSQL : sql
    }
}

extension SQLiteError: LocalizedError {
    /// The same text as ``description``, so that `localizedDescription` says what happened and what
    /// to do.
    public var errorDescription: String? { description }
}

extension StatementError: LocalizedError {
    /// The same text as ``description``, so that `localizedDescription` says what happened and what
    /// to do.
    public var errorDescription: String? { description }
}
