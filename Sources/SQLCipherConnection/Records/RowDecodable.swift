import CSQLCipher

/// A `Decodable` type that also reads a statement's row by column position, with an initializer
/// written for it.
///
/// `Decodable` rows pay for Codable's dispatch on every row and property: the generic
/// `container(keyedBy:)` reached through `any Decoder`, a container box per property. A
/// `RowDecodable` type has an initializer that reads each of its columns by index instead, the
/// indexes looked up by name once per statement, so that a query whose columns come in another
/// order (`SELECT *` after a migration) reads the right ones. The fetching APIs use it whenever the
/// type conforms: `Connection.query(_:_:_:)` with a type, `StatementRow.decode(_:)`
/// (so also inside ``Statement/forEachRow(_:)``), and the ``TableRecord`` methods.
///
/// The result is the one the type's `init(from:)` would give, error for error: the columns are
/// the coding keys' names (a `CodingKeys` enum renames them), matched exactly first, then
/// case-insensitively; an `Optional` property whose column is missing or `NULL` is `nil`; a
/// missing column is `DecodingError.keyNotFound` and a value that does not convert
/// `DecodingError.typeMismatch`, with the same messages; `Date`, `UUID` and the other
/// ``DatabaseValueConvertible`` types read their column directly; enums read their raw value, and
/// other nested `Decodable` values JSON text. The type stays `Decodable`: `Row.decode(_:)` and any
/// `Decoder` still use its `init(from:)`.
///
/// The conformance lists the columns (the coding keys' names, in the order of the properties it
/// reads) and reads position `i` into the property of `databaseColumnNames[i]`:
///
/// ```swift
/// struct Player: Codable, RowDecodable {
///     var id: Int64
///     var name: String
///     var joinedAt: Date?
///     enum CodingKeys: String, CodingKey { case id, name, joinedAt = "joined_at" }
///
///     static var databaseColumnNames: [String] { ["id", "name", "joined_at"] }
///     init(row: StatementRow, columns: RowColumns) throws {
///         self.id = try columns.decode(0, in: row)
///         self.name = try columns.decode(1, in: row)
///         self.joinedAt = try columns.decode(2, in: row)
///     }
/// }
///
/// let players = try db.query(Player.self, "SELECT * FROM players")   // positional decoding
/// ```
///
/// Declaring `init(row:columns:)` in the type itself, as here, removes the memberwise
/// initializer; declare it in an extension to keep it. The Records article says when the
/// conformance is worth writing.
public protocol RowDecodable: Decodable {
    /// The columns the type reads, by name, in the order of the positions
    /// ``init(row:columns:)`` reads (position `i` is `databaseColumnNames[i]`).
    ///
    /// ```swift
    /// Player.databaseColumnNames   // ["id", "name", "joined_at"]
    /// ```
    static var databaseColumnNames: [String] { get }

    /// Reads the current row of a statement, each position from the column `columns` resolved
    /// for it (see `RowColumns.decode(_:in:)`). Read every position of ``databaseColumnNames``
    /// into its property, and nothing else: the type of the property picks the reading.
    ///
    /// ```swift
    /// init(row: StatementRow, columns: RowColumns) throws {
    ///     self.id = try columns.decode(0, in: row)
    ///     self.name = try columns.decode(1, in: row)
    ///     self.joinedAt = try columns.decode(2, in: row)
    /// }
    /// ```
    /// - Throws: `DecodingError`, as the type's `init(from:)` would.
    init(row: StatementRow, columns: RowColumns) throws
}

/// The columns a ``RowDecodable`` type reads, resolved once against a statement's result columns:
/// for each of its ``RowDecodable/databaseColumnNames``, the index of the leftmost column with
/// that name (exact match first, then case-insensitive), or none.
///
/// The fetching APIs make one per statement and type; a type's ``RowDecodable/init(row:columns:)``
/// reads each position with `decode(_:in:)`.
///
/// ```swift
/// let columns = RowColumns(names: ["id", "name"], columnNames: ["name", "ID", "score"])
/// columns[0]   // Optional(1)
/// columns[1]   // Optional(0)
/// ```
public struct RowColumns: Sendable {
    /// The names asked for, in position order.
    ///
    /// ```swift
    /// RowColumns(names: ["id", "name"], columnNames: ["name", "id"]).names   // ["id", "name"]
    /// ```
    public let names: [String]
    /// The column index of each position; -1 when the result has no such column.
    @usableFromInline
    let indexes: [Int]

    /// Resolves `names` against the result columns `columnNames`.
    ///
    /// ```swift
    /// RowColumns(names: ["a"], columnNames: ["b"])[0]   // nil
    /// ```
    public init(names: [String], columnNames: [String]) {
        self.init(names: names, layout: ColumnLayout(names: columnNames))
    }

    init(names: [String], layout: ColumnLayout) {
        self.names = names
        indexes = names.map { layout.index(of: $0) ?? -1 }
    }

    /// The column index of `position`, or `nil` when the result has no column of that name.
    ///
    /// ```swift
    /// if columns[2] == nil { print("no column \(columns.names[2])") }
    /// ```
    public subscript(position: Int) -> Int? {
        let index = indexes[position]
        return index < 0 ? nil : index
    }

    /// Reads position `position` of the current row into a ``DatabaseValueConvertible`` type
    /// (`Int64`, `String`, `Date`, `UUID`, `Data`, optionals of these, …): the column's value
    /// converted by `init(databaseValue:)`, as the `Decodable` path reads it.
    ///
    /// ```swift
    /// self.name = try columns.decode(1, in: row)   // String
    /// ```
    /// - Throws: `DecodingError.keyNotFound` when the result has no such column (an `Optional`
    ///   is then `nil`), `DecodingError.typeMismatch` when the value does not convert.
    @inlinable @inline(__always)
    public func decode<T: Decodable & DatabaseValueConvertible>(_ position: Int, in row: StatementRow) throws -> T {
        let column = indexes[position]
        guard column >= 0 else { return try missingColumn(position, in: row, as: T.self) }
        let value = sqlite3_column_value(row.statement.handle, Int32(truncatingIfNeeded: column))
        if let native = Statement.nativeValue(T.self, value) { return native }
        let general = DatabaseValue(sqliteValue: value)
        guard let converted = T(databaseValue: general) else { throw mismatch(position, T.self, general) }
        return converted
    }

    /// Reads position `position` of the current row into any other `Decodable` type, as the
    /// `Decodable` path reads it: an enum by its raw value, `Float` and the other integer types
    /// by conversion, a nested value from JSON text.
    ///
    /// ```swift
    /// self.level = try columns.decode(3, in: row)   // enum Level: String, Codable
    /// ```
    /// - Throws: `DecodingError.keyNotFound` when the result has no such column (an `Optional`
    ///   is then `nil`), or what decoding the value throws.
    @inlinable
    public func decode<T: Decodable>(_ position: Int, in row: StatementRow) throws -> T {
        let column = indexes[position]
        guard column >= 0 else { return try missingColumn(position, in: row, as: T.self) }
        return try decodeValue(position, at: column, in: row, as: T.self)
    }

    // MARK: The slower paths, shared by every type

    /// `nil` for an `Optional` (as `decodeIfPresent` gives for a missing key), else the error of
    /// the `Decodable` path for a missing column.
    @usableFromInline
    func missingColumn<T>(_ position: Int, in row: StatementRow, as type: T.Type) throws -> T {
        if let optional = T.self as? any OptionalColumn.Type { return optional.absent as! T }
        let name = names[position]
        throw DecodingError.keyNotFound(ColumnKey(stringValue: name), .init(codingPath: [], debugDescription: "no column named \(name); the row has \(row.statement.layout.names.joined(separator: ", "))"))
    }

    /// The error of the `Decodable` path for a value that does not convert (naming the wrapped
    /// type of an `Optional`, as `decodeIfPresent` does).
    @usableFromInline
    func mismatch<T>(_ position: Int, _ type: T.Type, _ value: DatabaseValue) -> DecodingError {
        let named = (T.self as? any OptionalColumn.Type)?.wrappedType ?? T.self
        return ValueDecoder.mismatch(named, value, [ColumnKey(stringValue: names[position])])
    }

    /// A value of a type that is not ``DatabaseValueConvertible``, through the `Decodable` path's
    /// value decoder; an `Optional` is `nil` for `NULL` and its wrapped type otherwise.
    @usableFromInline
    func decodeValue<T: Decodable>(_ position: Int, at column: Int, in row: StatementRow, as type: T.Type) throws -> T {
        let decoder = ValueDecoder(value: row.statement.value(at: Int32(column)), codingPath: [ColumnKey(stringValue: names[position])])
        if let optional = T.self as? any OptionalColumn.Type {
            return try (decoder.value.isNull ? optional.absent : optional.decodeWrapped(decoder)) as! T
        }
        return try decoder.decode(T.self)
    }
}

/// The coding key of a column in the errors of ``RowColumns``.
struct ColumnKey: CodingKey {
    let stringValue: String
    init(stringValue: String) { self.stringValue = stringValue }
    var intValue: Int? { nil }
    init?(intValue: Int) { nil }
}

/// `Optional`, seen from code generic over any `Decodable` type.
protocol OptionalColumn {
    static var wrappedType: Any.Type { get }
    static var absent: Self { get }
    static func decodeWrapped(_ decoder: ValueDecoder) throws -> Self
}

extension Optional: OptionalColumn where Wrapped: Decodable {
    static var wrappedType: Any.Type { Wrapped.self }
    static var absent: Self { nil }
    static func decodeWrapped(_ decoder: ValueDecoder) throws -> Self { try decoder.decode(Wrapped.self) }
}

extension Statement {
    /// The columns of `T`, resolved against this statement's result columns once per type (and
    /// again after SQLite re-prepared the statement with other columns).
    @usableFromInline
    func recordColumns<T: RowDecodable>(for type: T.Type) -> RowColumns {
        if let cached = recordColumnsCache, cached.type == ObjectIdentifier(T.self) { return cached.columns }
        let columns = RowColumns(names: T.databaseColumnNames, layout: layout)
        recordColumnsCache = (ObjectIdentifier(T.self), columns)
        return columns
    }

    /// Every row from the statement's current position, read by `T`'s positional initializer;
    /// resets the statement afterwards. The columns are resolved after the first step, which is
    /// where SQLite re-prepares a statement whose schema changed.
    @inlinable
    func mapRecords<T: RowDecodable>(_ type: T.Type) throws -> [T] {
        defer { reset() }
        var result: [T] = []
        guard try step() else { return result }
        let columns = recordColumns(for: T.self)
        let row = StatementRow(statement: self)
        repeat { result.append(try T(row: row, columns: columns)) } while try step()
        return result
    }

    /// ``mapRecords(_:)`` for a `Decodable` type `T` found to be the ``RowDecodable`` type `R`
    /// at run time (a caller generic over `Decodable`).
    @usableFromInline
    func mapRecords<R: RowDecodable, T>(_ recordType: R.Type, as type: T.Type) throws -> [T] {
        precondition(R.self == T.self)
        return unsafeBitCast(try mapRecords(R.self), to: [T].self)
    }

    /// The current row read by the ``RowDecodable`` type `R`, which is `T` (see above).
    @usableFromInline
    func decodeRecord<R: RowDecodable, T>(_ recordType: R.Type, as type: T.Type) throws -> T {
        precondition(R.self == T.self)
        let record = try R(row: StatementRow(statement: self), columns: recordColumns(for: R.self))
        return unsafeBitCast(record, to: T.self)
    }
}
