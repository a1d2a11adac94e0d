import Foundation
/// A `Codable` type stored as one row of a table, identified by a primary-key column.
///
/// It requires a table name; the primary-key column is `id` unless ``primaryKeyColumn`` says
/// otherwise, and must be encoded. Coding keys are column names: `insert` and `update` write
/// every encoded property. An `Int64?` primary key that is `nil` on insert lets SQLite assign the
/// rowid (for `INTEGER PRIMARY KEY` columns); implement ``didInsert(rowID:)`` to keep it when you
/// insert with `&`.
///
/// ```swift
/// struct Player: TableRecord {
///     static let databaseTableName = "players"
///     var id: Int64?
///     var name: String
///     var score: Int
///     mutating func didInsert(rowID: Int64) { id = rowID }
/// }
/// var ann = Player(id: nil, name: "Ann", score: 10)
/// try db.insert(&ann)                  // ann.id == 1
/// let same = try db.fetch(Player.self, key: ann.id)
/// ```
///
/// The Records article lists the rules in full.
public protocol TableRecord: Codable {
    /// The table's name.
    static var databaseTableName: String { get }
    /// The primary-key column (`id` by default).
    static var primaryKeyColumn: String { get }
    /// Called by `Connection.insert(_:)` with `&record` after the row was inserted, with the new
    /// row's rowid — for an `INTEGER PRIMARY KEY` column, its primary key. The default does
    /// nothing; set your `id` here to keep the one SQLite assigned.
    mutating func didInsert(rowID: Int64)
}

extension TableRecord {
    /// `id`.
    public static var primaryKeyColumn: String { "id" }
    /// Does nothing.
    public mutating func didInsert(rowID: Int64) {}
}

/// A record operation that found no row to act on.
///
/// ```swift
/// do {
///     try db.update(player)
/// } catch RecordError.notFound {
///     try db.insert(player)  // what Connection.upsert(_:) does
/// }
/// ```
public enum RecordError: Error, Sendable, Equatable, CustomStringConvertible {
    /// ``Connection/update(_:)`` found no row with the record's primary key. `key` is the key as
    /// it would be written in Swift or SQL: `42`, `"abc"`, `1.5`, `NULL`, `x'0aff'`.
    case notFound(table: String, key: String)
    /// The record does not encode its primary-key column.
    case missingPrimaryKey(table: String, column: String)

    /// What went wrong, naming the table.
    public var description: String {
        switch self {
        case let .notFound(table, key): return "no row in \(table) has primary key \(key)"
        case let .missingPrimaryKey(table, column): return "the record for \(table) does not encode its primary-key column \(column)"
        }
    }
}

extension Connection {
    /// Inserts the record; a `NULL` integer primary key is assigned by SQLite. The record is taken
    /// by value: insert with `&record` to have the new id set on it.
    /// - Returns: the new row's rowid.
    /// - Throws: ``SQLiteError`` (e.g. a constraint), or `EncodingError`.
    @discardableResult
    public func insert<R: TableRecord>(_ record: R) throws -> Int64 {
        try insertRow(of: record)
    }

    /// Inserts the record, then calls its ``TableRecord/didInsert(rowID:)`` with the new row's
    /// rowid, so that a record with an `id` SQLite assigned can keep it.
    ///
    /// ```swift
    /// var ann = Player(id: nil, name: "Ann", score: 10)
    /// try db.insert(&ann)  // ann.id is the new rowid
    /// ```
    /// - Returns: the new row's rowid.
    /// - Throws: ``SQLiteError`` (e.g. a constraint), or `EncodingError`; the record is then
    ///   unchanged.
    @discardableResult
    public func insert<R: TableRecord>(_ record: inout R) throws -> Int64 {
        let rowID = try insertRow(of: record)
        record.didInsert(rowID: rowID)
        return rowID
    }

    private func insertRow<R: TableRecord>(of record: R) throws -> Int64 {
        let columns = try ColumnEncoder.columns(of: record)
        let names = columns.map { SQLIdentifier.quoted($0.0) }.joined(separator: ", ")
        let placeholders = Array(repeating: "?", count: columns.count).joined(separator: ", ")
        let statement = try cachedStatement("INSERT INTO \(SQLIdentifier.quoted(R.databaseTableName)) (\(names)) VALUES (\(placeholders))")
        try statement.execute(StatementArguments(columns.map { $0.1 }))
        return lastInsertRowID
    }

    /// Updates the row with the record's primary key.
    /// - Throws: ``RecordError/notFound(table:key:)`` when there is no such row, ``SQLiteError``.
    public func update<R: TableRecord>(_ record: R) throws {
        let (key, columns) = try keyAndColumns(of: record)
        guard !columns.isEmpty else { return }
        let assignments = columns.map { "\(SQLIdentifier.quoted($0.0)) = ?" }.joined(separator: ", ")
        let statement = try cachedStatement("UPDATE \(SQLIdentifier.quoted(R.databaseTableName)) SET \(assignments) WHERE \(SQLIdentifier.quoted(R.primaryKeyColumn)) = ?")
        try statement.execute(StatementArguments(columns.map { $0.1 } + [key]))
        if changes == 0 { throw RecordError.notFound(table: R.databaseTableName, key: key.asWritten) }
    }

    /// Updates the row with the record's primary key, or inserts it when there is none.
    ///
    /// Unlike `INSERT OR REPLACE`, an existing row is updated in place: no delete triggers fire
    /// and no foreign-key cascades run.
    /// - Throws: ``SQLiteError`` or `EncodingError`.
    public func upsert<R: TableRecord>(_ record: R) throws {
        try savepoint { db in
            do {
                try db.update(record)
            } catch RecordError.notFound {
                try db.insert(record)
            }
        }
    }

    /// The record with this primary key, or `nil`.
    /// - Throws: ``SQLiteError`` or `DecodingError`.
    public func fetch<R: TableRecord>(_ type: R.Type, key: some DatabaseValueConvertible) throws -> R? {
        let statement = try cachedStatement("SELECT * FROM \(SQLIdentifier.quoted(R.databaseTableName)) WHERE \(SQLIdentifier.quoted(R.primaryKeyColumn)) = ?")
        try statement.bind([key])
        return try statement.firstRow { try $0.decode(R.self) }
    }

    /// Every record of the table, in primary-key order.
    /// - Throws: ``SQLiteError`` or `DecodingError`.
    public func fetchAll<R: TableRecord>(_ type: R.Type) throws -> [R] {
        try query(R.self, "SELECT * FROM \(SQLIdentifier.quoted(R.databaseTableName)) ORDER BY \(SQLIdentifier.quoted(R.primaryKeyColumn))")
    }

    /// Deletes the record with this primary key.
    /// - Returns: `true` when a row was deleted.
    /// - Throws: ``SQLiteError``.
    @discardableResult
    public func delete<R: TableRecord>(_ type: R.Type, key: some DatabaseValueConvertible) throws -> Bool {
        let statement = try cachedStatement("DELETE FROM \(SQLIdentifier.quoted(R.databaseTableName)) WHERE \(SQLIdentifier.quoted(R.primaryKeyColumn)) = ?")
        try statement.execute([key])
        return changes > 0
    }

    /// The number of rows in the record's table.
    /// - Throws: ``SQLiteError``.
    public func count<R: TableRecord>(_ type: R.Type) throws -> Int {
        try queryValue("SELECT count(*) FROM \(SQLIdentifier.quoted(R.databaseTableName))", as: Int.self) ?? 0
    }

    private func keyAndColumns<R: TableRecord>(of record: R) throws -> (DatabaseValue, [(String, DatabaseValue)]) {
        var columns = try ColumnEncoder.columns(of: record)
        guard let index = columns.firstIndex(where: { $0.0 == R.primaryKeyColumn }) else {
            throw RecordError.missingPrimaryKey(table: R.databaseTableName, column: R.primaryKeyColumn)
        }
        let key = columns.remove(at: index).1
        return (key, columns)
    }
}

extension DatabaseValue {
    /// The value as a user writes it in Swift or SQL, for messages: `42`, `1.5`, `"abc"`, `NULL`,
    /// `x'0aff'` (a blob over 32 bytes is shown by its size only).
    fileprivate var asWritten: String {
        switch self {
        case .null: return "NULL"
        case .integer(let value): return String(value)
        case .real(let value): return String(value)
        case .text(let value): return value.debugDescription
        case .blob(let bytes) where bytes.count <= 32: return "x'" + bytes.map { String(format: "%02x", $0) }.joined() + "'"
        case .blob(let bytes): return "a \(bytes.count)-byte blob"
        }
    }
}

extension RecordError: LocalizedError {
    /// The same text as ``description``, so that `localizedDescription` says what happened and what
    /// to do.
    public var errorDescription: String? { description }
}
