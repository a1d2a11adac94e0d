import EncryptedSQLite
import FluentKit
import FluentSQL
import NIOCore
import SQLKit

/// The Fluent database of one request context: converts Fluent's queries and schemas to SQL and
/// runs them through ``EncryptedSQLDatabase``; inside `transaction {}` every query goes through
/// the one write transaction of `sql`.
struct FluentEncryptedSQLiteDatabase: Database, SQLDatabase {
    let sql: EncryptedSQLDatabase
    let context: DatabaseContext

    var inTransaction: Bool { sql.session != nil }
    var dialect: any SQLDialect { sql.dialect }
    var version: (any SQLDatabaseReportedVersion)? { sql.version }
    var queryLogLevel: Logger.Level? { sql.queryLogLevel }

    // MARK: Fluent

    func execute(query: DatabaseQuery, onOutput: @escaping @Sendable (any DatabaseOutput) -> Void) -> EventLoopFuture<Void> {
        // Fluent expects its outputs on the event loop: the rows are collected on the database's
        // thread, then handed over there.
        eventLoop.makeFutureWithTask { try await self.rows(of: query) }.map { rows in
            for row in rows { onOutput(SQLRowOutput(row: row, schema: nil)) }
        }
    }

    /// Runs a Fluent query and returns its rows.
    func rows(of query: DatabaseQuery) async throws -> [any SQLRow] {
        var expression = SQLQueryConverter(delegate: EncryptedSQLiteConverterDelegate()).convert(query)
        var insertIDColumn: String?
        // A create reports the database-generated id: with RETURNING where the engine has it
        // (SQLite 3.35), else as the connection's last insert rowid, read right after the INSERT.
        if case .create = query.action, query.customIDKey != .some(.string("")) {
            let idKey = (query.customIDKey ?? .id).description
            if sql.dialect.supportsReturning {
                expression = SQLKit.SQLList([expression, SQLReturning(SQLColumn(idKey))], separator: SQLRaw(" "))
            } else {
                insertIDColumn = idKey
            }
        }
        let (text, binds) = sql.serialize(expression)
        let rows = RowCollector()
        try await sql.run(sql: text, binds: binds, insertIDColumn: insertIDColumn) { rows.append($0) }
        return rows.rows
    }

    func execute(schema: DatabaseSchema) -> EventLoopFuture<Void> {
        var schema = schema
        if schema.action == .update {
            // Enums are TEXT: their updates change nothing.
            schema.updateFields = schema.updateFields.filter {
                if case .dataType(_, .enum) = $0 { return false }
                return true
            }
            guard schema.createConstraints.isEmpty, schema.updateFields.isEmpty, schema.deleteConstraints.isEmpty else {
                return eventLoop.makeFailedFuture(UnsupportedAlterError())
            }
            if schema.createFields.isEmpty, schema.deleteFields.isEmpty {
                return eventLoop.makeSucceededVoidFuture()
            }
        }
        let expression = SQLSchemaConverter(delegate: EncryptedSQLiteConverterDelegate()).convert(schema)
        return sql.execute(sql: expression) { _ in }
    }

    func execute(enum: DatabaseEnum) -> EventLoopFuture<Void> {
        eventLoop.makeSucceededVoidFuture()
    }

    func transaction<T>(_ closure: @escaping @Sendable (any Database) -> EventLoopFuture<T>) -> EventLoopFuture<T> {
        if inTransaction { return closure(self) }
        return eventLoop.makeFutureWithTask {
            try await self.sql.transaction { tx in
                try await closure(FluentEncryptedSQLiteDatabase(sql: tx, context: self.context)).map { UncheckedBox($0) }.get()
            }
        }.map(\.value)
    }

    func withConnection<T>(_ closure: @escaping @Sendable (any Database) -> EventLoopFuture<T>) -> EventLoopFuture<T> {
        closure(self)
    }

    // MARK: SQLKit

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) -> EventLoopFuture<Void> {
        sql.execute(sql: query, onRow)
    }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) async throws {
        try await sql.execute(sql: query, onRow)
    }

    func withSession<R>(_ closure: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        try await closure(self)
    }
}

/// The rows of one statement, appended on the database's thread one after another, read after
/// the statement returned.
final class RowCollector: @unchecked Sendable {
    private(set) var rows: [any SQLRow] = []
    func append(_ row: any SQLRow) { rows.append(row) }
}

/// A value handed through a `Sendable` boundary by Fluent's future-based `transaction`, whose
/// result type is not required to be `Sendable`; it is produced and consumed in sequence.
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// SQLite's column types for Fluent's: strings and enums are `TEXT`, dates `REAL` (Unix seconds),
/// 64-bit integers `INTEGER` (so an integer primary key is the rowid).
struct EncryptedSQLiteConverterDelegate: SQLConverterDelegate {
    func customDataType(_ dataType: DatabaseSchema.DataType) -> (any SQLExpression)? {
        switch dataType {
        case .string, .enum: SQLRaw("TEXT")
        case .datetime: SQLRaw("REAL")
        case .int64: SQLRaw("INTEGER")
        default: nil
        }
    }
}

/// A schema update SQLite's `ALTER TABLE` cannot make.
struct UnsupportedAlterError: Error, CustomStringConvertible {
    var description: String {
        "SQLite's ALTER TABLE supports only adding columns (and, from SQLite 3.35.0, dropping them): it cannot add or drop constraints or change a column's type; create a new table and copy the rows instead"
    }
}

/// A result row as Fluent's output, with the `schema_` prefix Fluent's joins use.
struct SQLRowOutput: DatabaseOutput {
    let row: any SQLRow
    let schema: String?

    var description: String { String(describing: row) }

    private func column(_ key: FieldKey) -> String {
        (schema.map { FieldKey.prefix(.prefix(.string($0), "_"), key) } ?? key).description
    }

    func schema(_ schema: String) -> any DatabaseOutput { SQLRowOutput(row: row, schema: schema) }
    func contains(_ key: FieldKey) -> Bool { row.contains(column: column(key)) }
    func decodeNil(_ key: FieldKey) throws -> Bool { try row.decodeNil(column: column(key)) }
    func decode<T: Decodable>(_ key: FieldKey, as type: T.Type) throws -> T { try row.decode(column: column(key), as: T.self) }
}
