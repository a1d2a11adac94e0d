import EncryptedSQLite
import Foundation
import Logging
import NIOCore
import NIOPosix
import SQLKit

/// An SQLKit database over an ``EncryptedSQLite/EncryptedDatabase``: every query SQLKit builds
/// (or `raw` SQL) runs on the library's connections, with the dialect of the linked SQLite
/// (``EncryptedSQLiteDialect``).
///
/// Statements that start with `SELECT`, `WITH` or `VALUES` and that SQLite reports read-only go
/// to `database.read` (a pooled reader when `OpenOptions.concurrentReaders` > 0); everything else
/// goes to `database.write`, one transaction per statement. Inside ``transaction(_:)`` every
/// statement runs in the one write transaction.
///
/// ```swift
/// let database = try EncryptedDatabase(path: "app.sqlite", keysFile: "Keys")
/// let sql = EncryptedSQLDatabase(database: database)
/// try await sql.create(table: "notes").column("id", type: .int, .primaryKey).column("text", type: .text).run()
/// try await sql.insert(into: "notes").columns("text").values("hello").run()
/// let rows = try await sql.select().column("text").from("notes").all()
/// ```
public struct EncryptedSQLDatabase: SQLDatabase {
    /// The database the queries run on (an error when it could not be opened).
    let opened: Result<EncryptedDatabase, any Error>
    /// The write transaction the queries run in, inside ``transaction(_:)``.
    let session: WriteSession?
    let encoder: ValueEncoder
    let decoder: ValueDecoder
    /// Where queries are logged (their SQL only, never bound values), at ``queryLogLevel``.
    public let logger: Logger
    /// The event loop of the `EventLoopFuture` API.
    public let eventLoop: any EventLoop
    /// The level queries are logged at (`nil`: not logged).
    public let queryLogLevel: Logger.Level?

    /// An SQLKit database over `database`.
    /// - Parameters:
    ///   - logger: where queries are logged (SQL text only).
    ///   - eventLoop: the event loop of SQLKit's `EventLoopFuture` API (default: one of NIO's
    ///     shared group).
    ///   - queryLogLevel: the level queries are logged at (`nil`: not logged).
    ///   - jsonEncoder, jsonDecoder: how values that are not a single SQLite value (structs,
    ///     arrays, dictionaries) are stored as JSON text and read back.
    public init(
        database: EncryptedDatabase,
        logger: Logger = Logger(label: "EncryptedSQLite.sql"),
        eventLoop: any EventLoop = MultiThreadedEventLoopGroup.singleton.any(),
        queryLogLevel: Logger.Level? = .debug,
        jsonEncoder: JSONEncoder = JSONEncoder(),
        jsonDecoder: JSONDecoder = JSONDecoder()
    ) {
        self.init(opened: .success(database), session: nil, encoder: ValueEncoder(json: jsonEncoder), decoder: ValueDecoder(json: jsonDecoder),
                  logger: logger, eventLoop: eventLoop, queryLogLevel: queryLogLevel)
    }

    init(opened: Result<EncryptedDatabase, any Error>, session: WriteSession?, encoder: ValueEncoder, decoder: ValueDecoder,
         logger: Logger, eventLoop: any EventLoop, queryLogLevel: Logger.Level?) {
        self.opened = opened
        self.session = session
        self.encoder = encoder
        self.decoder = decoder
        self.logger = logger
        self.eventLoop = eventLoop
        self.queryLogLevel = queryLogLevel
    }

    /// The same database, running its queries in `session`.
    func inSession(_ session: WriteSession) -> EncryptedSQLDatabase {
        EncryptedSQLDatabase(opened: opened, session: session, encoder: encoder, decoder: decoder,
                             logger: logger, eventLoop: eventLoop, queryLogLevel: queryLogLevel)
    }

    /// ``EncryptedSQLiteDialect`` of the linked SQLite.
    public var dialect: any SQLDialect { EncryptedSQLiteDialect() }

    /// The linked SQLite's version (``SQLiteVersion/linked``).
    public var version: (any SQLDatabaseReportedVersion)? { SQLiteVersion.linked }

    /// Runs `query`, calling `onRow` with each result row.
    /// - Throws (in the future): `SQLiteError` (a `DatabaseError`: constraint, syntax) with
    ///   SQLite's message; `EncryptedDatabaseError` (`.closed` after shutdown, `.writerWaitExpired`).
    public func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) -> EventLoopFuture<Void> {
        eventLoop.makeFutureWithTask { try await self.execute(sql: query, onRow) }
    }

    /// Runs `query`, calling `onRow` with each result row.
    /// - Throws: `SQLiteError` (a `DatabaseError`: constraint, syntax) with SQLite's message;
    ///   `EncryptedDatabaseError` (`.closed` after shutdown, `.writerWaitExpired`).
    public func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) async throws {
        let (sql, binds) = serialize(query)
        try await run(sql: sql, binds: binds, insertIDColumn: nil, onRow)
    }

    /// Runs `closure` with this database (every query of SQLKit's session runs as usual).
    /// - Throws: what `closure` throws.
    public func withSession<R>(_ closure: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        try await closure(self)
    }

    /// Runs `body` in one write transaction (`writeTransaction`): every query of the database
    /// `body` receives runs on the writer, inside one `IMMEDIATE` transaction that commits when
    /// `body` returns and rolls back when it throws. Inside a transaction, runs `body` in it.
    ///
    /// ```swift
    /// try await sql.transaction { tx in
    ///     try await tx.insert(into: "notes").columns("text").values("a").run()
    ///     try await tx.insert(into: "notes").columns("text").values("b").run()
    /// }
    /// ```
    /// - Throws: what `body` throws (after the rollback); the commit's `SQLiteError`;
    ///   `EncryptedDatabaseError.writerWaitExpired` or `CancellationError` when `body` never started.
    public func transaction<T: Sendable>(_ body: (EncryptedSQLDatabase) async throws -> T) async throws -> T {
        if session != nil { return try await body(self) }
        return try await opened.get().writeTransaction { session in try await body(self.inSession(session)) }
    }

    /// Runs one statement: binds its values, calls `onRow` with each row (and, when
    /// `insertIDColumn` is set, with one more row holding the last insert rowid under that name).
    func run(sql: String, binds: [any Encodable & Sendable], insertIDColumn: String?,
             _ onRow: @escaping @Sendable (any SQLRow) -> Void) async throws {
        let database = try opened.get()
        if let level = queryLogLevel { logger.log(level: level, "\(sql) [\(binds.count) binds]") }
        let arguments = StatementArguments(try binds.map { try encoder.encode($0) })
        let decoder = self.decoder
        @Sendable func step(_ statement: Statement, _ db: Connection) throws {
            try statement.bind(arguments)
            var columns: [String]?
            try statement.forEachRow { row in
                let names = columns ?? row.columnNames
                columns = names
                var values = [DatabaseValue]()
                values.reserveCapacity(row.count)
                for index in 0..<row.count { values.append(row[index]) }
                onRow(EncryptedSQLiteRow(columns: names, values: values, decoder: decoder))
            }
            if let insertIDColumn {
                onRow(EncryptedSQLiteRow(columns: [insertIDColumn], values: [.integer(db.lastInsertRowID)], decoder: decoder))
            }
        }
        if let session {
            return try await session.run { db in try step(db.prepare(sql), db) }
        }
        if Self.mayRead(sql) {
            let done = try await database.read { db -> Bool in
                let statement = try db.prepare(sql)
                guard statement.isReadOnly else { return false }
                try step(statement, db)
                return true
            }
            if done { return }
        }
        try await database.write { db in try step(db.prepare(sql), db) }
    }

    /// `true` for the statements that may be reads: `SELECT`, `WITH`, `VALUES` (SQLite then
    /// confirms with `sqlite3_stmt_readonly`; a `WITH … INSERT` goes to the writer).
    static func mayRead(_ sql: String) -> Bool {
        let start = sql.utf8.drop { $0 == 0x20 || $0 == 0x0A || $0 == 0x09 || $0 == 0x0D || $0 == 0x28 }
        let word = String(decoding: start.prefix(6), as: UTF8.self).uppercased()
        return word.hasPrefix("SELECT") || word.hasPrefix("WITH") || word.hasPrefix("VALUES")
    }
}
