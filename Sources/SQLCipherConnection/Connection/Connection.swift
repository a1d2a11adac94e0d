import CSQLCipher
import Foundation

/// One SQLCipher connection to one database file: the single path to SQLite in this library.
///
/// The application, the key rotation and the migrator all run their SQL through this type's
/// ``execute(_:_:)``, ``query(_:_:)`` and ``prepare(_:)``. You get a connection inside
/// `EncryptedDatabase/read(_:)` and `EncryptedDatabase/write(_:)`; the library opens and keys
/// it for you.
///
/// A connection is keyed exactly once, when it opens: SQLCipher 3.4.1 corrupts reads when a key is
/// set on a handle that has already read the database, so no API here does that.
///
/// Every connection runs with `PRAGMA temp_store = MEMORY`, and an authorizer refuses statements
/// that would change it (SQLCipher writes temporary tables and sort spills to unencrypted files
/// otherwise), that would pass key material as SQL text (`PRAGMA key`, `rekey`, `hexkey`,
/// `hexrekey`), or that would change process-wide cipher defaults (`cipher_default_*`).
///
/// A connection is not thread-safe; use it from one thread at a time (``EncryptedDatabase``
/// serializes access for you).
///
/// ```swift
/// try database.write { db in
///     try db.execute("INSERT INTO users(name) VALUES (?)", ["Ann"])
///     let count = try db.queryValue("SELECT count(*) FROM users", as: Int64.self)
/// }
/// ```
public final class Connection {
    /// How a connection opens its file.
    ///
    /// ```swift
    /// if db.accessMode == .readOnly { return }
    /// ```
    public enum AccessMode: Sendable, Equatable {
        /// Reads and writes.
        case readWrite
        /// Reads only; nothing is written, not even a recovery of a hot journal.
        case readOnly
    }

    package let handle: OpaquePointer
    /// The path the connection was opened with.
    public let path: String
    /// The access mode the connection was opened with.
    public let accessMode: AccessMode

    /// Opens `path` and keys it with `key` (or leaves it unkeyed when `key` is `nil`), then runs
    /// the key's ``SQLCipherKey/keySetup`` (its cipher settings) before anything is read.
    ///
    /// The file must exist unless `create` is set. Nothing is read from the file here, so a
    /// wrong key is only detected by the first read (see ``verifyReadable()``).
    /// - Throws: ``SQLiteError`` when SQLite cannot open the file or a setup statement fails.
    package init(path: String, access: AccessMode, create: Bool = false, sqlcipherKey key: (any SQLCipherKey)?, busyTimeout: Duration) throws {
        var flags = SQLITE_OPEN_NOMUTEX
        switch access {
        case .readWrite: flags |= SQLITE_OPEN_READWRITE
        case .readOnly: flags |= SQLITE_OPEN_READONLY
        }
        if create { flags |= SQLITE_OPEN_CREATE }
        handle = try Self.open(path, flags: flags)
        self.path = path
        accessMode = access
        #if DEBUG
        observation = SQLObservation.shared.attach(handle: handle, path: path)
        #endif
        sqlite3_extended_result_codes(handle, 1)
        if let key {
            let keyCode = key.withSQLCipherBytes { bytes in
                sqlite3_key(handle, bytes.baseAddress, Int32(bytes.count))
            }
            guard keyCode == SQLITE_OK else { throw error(code: keyCode, sql: nil) }
            for statement in key.keySetup { try execute(statement) }
        }
        setBusyTimeout(busyTimeout)
        // Setting temp_store does not read the database file, so it is safe right after the key.
        try execute("PRAGMA temp_store = MEMORY")
        sqlite3_set_authorizer(handle, connectionAuthorizer, Unmanaged.passUnretained(refusal).toOpaque())
    }

    /// Opens `path` read-only, without a key and without running any SQL, only to read the
    /// file's raw bytes through ``mainDatabaseFile()`` (see ``DatabaseFilePrefix``).
    ///
    /// - Throws: ``SQLiteError`` when SQLite cannot open the file.
    package init(rawFileAt path: String) throws {
        handle = try Self.open(path, flags: SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX)
        self.path = path
        accessMode = .readOnly
        sqlite3_set_authorizer(handle, connectionAuthorizer, Unmanaged.passUnretained(refusal).toOpaque())
    }

    /// A new SQLite handle on `path`, or the error (the failed handle is closed).
    private static func open(_ path: String, flags: Int32) throws -> OpaquePointer {
        var opened: OpaquePointer?
        let code = sqlite3_open_v2(path, &opened, flags, nil)
        guard code == SQLITE_OK, let opened else {
            let error = SQLiteError.from(handle: opened, code: code, sql: nil)
            sqlite3_close_v2(opened)
            throw error
        }
        return opened
    }

    package private(set) var isClosed = false
    /// Why the authorizer refused the statement being prepared; it lives as long as the handle.
    private let refusal = AuthorizerRefusal()
    /// How many savepoints ``savepoint(_:)`` has open, to name the next one.
    var savepointDepth = 0
    /// Prepared statements kept by ``cachedStatement(_:)``, by SQL text.
    var statementCache: [String: Statement] = [:]
    /// `PRAGMA schema_version`, prepared once for ``readSchemaVersion()``.
    private var schemaVersionProbe: Statement?
    /// `true` while the writer connection is lent to a read: the first statement that may write
    /// (`sqlite3_stmt_readonly` false, e.g. an `INSERT` or `PRAGMA journal_mode`) turns
    /// `PRAGMA query_only` on until the read ends, so SQLite refuses any write with
    /// `SQLITE_READONLY`. Setting `query_only` expires every prepared statement of the connection,
    /// so reads that only read no longer pay for it.
    private(set) var readsOnly = false {
        didSet {
            guard !readsOnly, queryOnlyOn else { return }
            queryOnlyOn = false
            sqlite3_exec(handle, "PRAGMA query_only = 0", nil, nil, nil)
        }
    }
    private var queryOnlyOn = false
    /// Custom SQL functions, kept alive while the connection lives.
    var functionBoxes: [AnyObject] = []
    #if DEBUG
    /// Test-only SQL observation (see ``SQLObservation``); `nil` unless a test asked for it.
    var observation: SQLObservation.Attachment?
    #endif

    deinit { close() }

    /// Closes the handle now. An open transaction is rolled back by SQLite; the connection must
    /// not be used afterwards.
    package func close() {
        guard !isClosed else { return }
        isClosed = true
        statementCache.removeAll()
        schemaVersionProbe = nil
        sqlite3_close_v2(handle)
    }

    /// Every statement starts here: a closed handle has been freed, so using it would read freed
    /// memory instead of failing.
    /// - Throws: ``SQLiteError`` with code ``ResultCode/misuse`` when the connection is closed.
    private func checkOpen(_ sql: String) throws {
        guard isClosed else { return }
        throw SQLiteError(code: .misuse, message: "the connection is closed", sql: sql)
    }

    /// Sets how long a statement waits for another connection's lock before it fails with
    /// `SQLITE_BUSY`.
    public func setBusyTimeout(_ timeout: Duration) {
        let milliseconds = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        sqlite3_busy_timeout(handle, Int32(clamping: milliseconds))
    }

    /// Reads the schema, which is what proves that the key opens the file.
    ///
    /// - Throws: ``SQLiteError`` with code ``ResultCode/notADatabase`` when the key is wrong or the
    ///   file is not a database, or another code (busy, I/O) when the file could not be read.
    public func verifyReadable() throws {
        _ = try queryValue("SELECT count(*) FROM sqlite_master", as: Int64.self)
    }

    /// Steps `PRAGMA schema_version`: the cheapest statement that starts a read transaction on the
    /// main database, which reads page 1 and so proves the key. Its statement is prepared once and
    /// kept apart from the statement cache (no lookup by text, no bindings).
    /// - Throws: ``SQLiteError``: ``ResultCode/notADatabase`` when the key no longer opens the file.
    package func readSchemaVersion() throws {
        let probe: Statement
        if let schemaVersionProbe {
            probe = schemaVersionProbe
        } else {
            probe = try prepare("PRAGMA schema_version")
            schemaVersionProbe = probe
        }
        defer { probe.reset() }
        try probe.step()
    }

    /// Runs `body` with this connection lent to a read: a statement that may write fails with
    /// `SQLITE_READONLY` (`PRAGMA query_only` is turned on when the first such statement starts,
    /// and off again when `body` returns), while reads pay nothing for the guard.
    ///
    /// ```swift
    /// let count = try writer.readingOnly { db in try db.queryValue("SELECT count(*) FROM t", as: Int.self) }
    /// ```
    /// - Throws: whatever `body` throws, or ``SQLiteError`` (code `readOnly`) when it tries to write.
    package func readingOnly<T>(_ body: (Connection) throws -> T) rethrows -> T {
        readsOnly = true
        defer { readsOnly = false }
        return try body(self)
    }

    /// Turns `PRAGMA query_only` on for the rest of a read (see ``readsOnly``).
    func turnOnQueryOnly() throws {
        guard !queryOnlyOn else { return }
        let code = sqlite3_exec(handle, "PRAGMA query_only = 1", nil, nil, nil)
        guard code == SQLITE_OK else { throw error(code: code, sql: "PRAGMA query_only = 1") }
        queryOnlyOn = true
    }

    // MARK: Running SQL

    /// Prepares one statement.
    /// - Throws: ``SQLiteError`` for invalid SQL, ``StatementError/emptyStatement(sql:)`` when the
    ///   text holds no statement.
    public func prepare(_ sql: String) throws -> Statement {
        #if DEBUG
        observation?.record(.prepared(sql))
        #endif
        try checkOpen(sql)
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard code == SQLITE_OK else { throw error(code: code, sql: sql) }
        guard let statement else { throw StatementError.emptyStatement(sql: sql) }
        return Statement(connection: self, handle: statement, sql: sql)
    }

    /// Runs one or several statements separated by semicolons.
    ///
    /// Positional arguments are consumed by the statements in order; named arguments are matched
    /// in every statement that uses the name, and each must be used at least once.
    /// - Throws: ``SQLiteError`` naming the failing statement, or ``StatementError``.
    public func execute(_ sql: String, _ arguments: StatementArguments = StatementArguments()) throws {
        #if DEBUG
        observation?.record(.prepared(sql))
        #endif
        try checkOpen(sql)
        var consumed = 0
        var usedNames = Set<String>()
        var last: Statement?
        let utf8 = Array(sql.utf8CString)
        try utf8.withUnsafeBufferPointer { buffer in
            guard let start = buffer.baseAddress else { return }
            var cursor = start
            while cursor.pointee != 0 {
                var statementHandle: OpaquePointer?
                var tail: UnsafePointer<CChar>?
                let code = sqlite3_prepare_v2(handle, cursor, -1, &statementHandle, &tail)
                let end = tail ?? UnsafePointer(start.advanced(by: buffer.count - 1))
                let text = trimmedSQL(UnsafeRawBufferPointer(start: cursor, count: end - cursor))
                // On failure SQLite's tail points where parsing stopped: report the whole rest.
                guard code == SQLITE_OK else { throw error(code: code, sql: String(cString: cursor).trimmingCharacters(in: .whitespacesAndNewlines)) }
                cursor = end
                guard let statementHandle else { continue }  // only whitespace or a comment
                let statement = Statement(connection: self, handle: statementHandle, sql: text)
                try statement.bind(arguments, positionalOffset: &consumed, usedNames: &usedNames)
                while try statement.step() {}
                last = statement
            }
        }
        if let last {
            try last.checkAllConsumed(arguments, consumed: consumed, usedNames: usedNames)
        } else if !arguments.isEmpty {
            try Statement.checkNoArguments(arguments, sql: sql)
        }
    }

    // MARK: State

    /// The rowid of the most recent successful `INSERT` on this connection.
    public var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// The number of rows changed by the most recent `INSERT`, `UPDATE` or `DELETE`.
    public var changes: Int { Int(sqlite3_changes(handle)) }

    /// The number of rows changed since the connection opened.
    public var totalChanges: Int { Int(sqlite3_total_changes(handle)) }

    /// `true` when the main database is read-only for this connection (opened read-only, or the
    /// file or its folder could not be opened for writing).
    public var isReadOnly: Bool { sqlite3_db_readonly(handle, "main") == 1 }

    /// `true` when no transaction is open.
    public var isAutocommit: Bool { sqlite3_get_autocommit(handle) != 0 }

    /// The database's `user_version`.
    /// - Throws: ``SQLiteError``.
    public func userVersion() throws -> Int32 {
        try queryValue("PRAGMA user_version", as: Int32.self) ?? 0
    }

    /// Sets the database's `user_version`.
    /// - Throws: ``SQLiteError``.
    public func setUserVersion(_ version: Int32) throws {
        try execute("PRAGMA user_version = \(version)")
    }

    /// The database's `application_id`.
    /// - Throws: ``SQLiteError``.
    public func applicationID() throws -> Int32 {
        try queryValue("PRAGMA application_id", as: Int32.self) ?? 0
    }

    /// Sets the database's `application_id`.
    /// - Throws: ``SQLiteError``.
    public func setApplicationID(_ id: Int32) throws {
        try execute("PRAGMA application_id = \(id)")
    }

    /// The value of an integer pragma such as `page_size`, `cipher_page_size` or `kdf_iter`, or
    /// `nil` when it has none. SQLCipher 4 answers some pragmas itself, as text (`PRAGMA page_size`
    /// comes back as a TEXT column named `cipher_page_size`), SQLite and SQLCipher 3 as an integer:
    /// this reads both, so the same code works on every engine (`queryValue(_:as: Int.self)` does
    /// not turn text into a number).
    ///
    /// ```swift
    /// let pageSize = try database.read { try $0.integerPragma("page_size") }   // 4096 on SQLCipher 4
    /// ```
    /// - Throws: ``SQLiteError``.
    public func integerPragma(_ pragma: String) throws -> Int? {
        guard let row = try queryOne("PRAGMA \(pragma)") else { return nil }
        switch row.values.first {
        case .integer(let value): return Int(value)
        case .text(let text): return Int(text.trimmingCharacters(in: .whitespaces))
        default: return nil
        }
    }

    /// The journal mode, lowercased: `delete`, `wal`, `truncate`, `persist`, `memory` or `off`.
    /// - Throws: ``SQLiteError``.
    public func journalMode() throws -> String {
        (try queryValue("PRAGMA journal_mode", as: String.self) ?? "delete").lowercased()
    }

    /// The error of the last failed call on this connection. When the authorizer refused the
    /// statement, SQLite's "not authorized" is followed by why.
    package func error(code: Int32, sql: String?) -> SQLiteError {
        let error = SQLiteError.from(handle: handle, code: code, sql: sql)
        guard let reason = refusal.take(), error.code.primary == .notAuthorized else { return error }
        return SQLiteError(code: error.code, message: "\(error.message): \(reason)", sql: error.sql)
    }
}

/// The text of one statement without the whitespace around it. ASCII whitespace is skipped byte by
/// byte (Foundation's trimming cost more than preparing the statement: Benchmarks/README.md);
/// text that still starts or ends with a non-ASCII byte goes through Foundation, which knows every
/// Unicode whitespace.
private func trimmedSQL(_ bytes: UnsafeRawBufferPointer) -> String {
    func isASCIIWhitespace(_ byte: UInt8) -> Bool { byte == 0x20 || (byte >= 0x09 && byte <= 0x0D) }
    var start = 0
    var end = bytes.count
    while start < end, isASCIIWhitespace(bytes[start]) { start += 1 }
    while end > start, isASCIIWhitespace(bytes[end - 1]) { end -= 1 }
    let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
    guard start < end, bytes[start] >= 0x80 || bytes[end - 1] >= 0x80 else { return text }
    return text.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// The reason for the authorizer's last refusal on one connection, until the error is made.
private final class AuthorizerRefusal {
    private var reason: String?

    func record(_ reason: String) { self.reason = reason }

    /// The reason, cleared.
    func take() -> String? {
        defer { reason = nil }
        return reason
    }
}

/// Refuses SQL that would write plaintext temp files, put key material in SQL text, or change
/// process-wide cipher defaults. Installed on every connection after its own setup.
private func connectionAuthorizer(
    _ context: UnsafeMutableRawPointer?, _ action: Int32,
    _ first: UnsafePointer<CChar>?, _ second: UnsafePointer<CChar>?,
    _ database: UnsafePointer<CChar>?, _ trigger: UnsafePointer<CChar>?
) -> Int32 {
    guard action == SQLITE_PRAGMA, let first else { return SQLITE_OK }
    let pragma = String(cString: first).lowercased()
    guard let reason = refusalReason(pragma: pragma, value: second.map { String(cString: $0).lowercased() }) else { return SQLITE_OK }
    if let context { Unmanaged<AuthorizerRefusal>.fromOpaque(context).takeUnretainedValue().record(reason) }
    return SQLITE_DENY
}

/// Why the connection refuses `PRAGMA pragma` (with `value` when it sets one), or `nil` when it
/// allows it. The reason ends up in the ``SQLiteError`` the statement throws.
private func refusalReason(pragma: String, value: String?) -> String? {
    let plaintextFiles = "temp_store is pinned to MEMORY so that SQLCipher never writes plaintext temporary files"
    switch pragma {
    case "key", "rekey", "hexkey", "hexrekey":
        return "PRAGMA \(pragma) is refused: pass keys through the library (a KeyList or the Keys file), not SQL text, which can end up in logs and error messages; the library rotates keys itself"
    case "temp_store_directory":
        return "PRAGMA temp_store_directory is refused: \(plaintextFiles)"
    case "temp_store":
        // Reading is fine; only MEMORY (2) may be set.
        guard let value, value != "memory", value != "2" else { return nil }
        return "PRAGMA temp_store can only be MEMORY: \(plaintextFiles)"
    default:
        guard pragma.hasPrefix("cipher_default_") else { return nil }
        return "PRAGMA \(pragma) is refused: it would change the cipher settings of every connection in the process; give a key its settings instead (CipherSettings, or `cipher:` in the Keys file)"
    }
}
