import Foundation

extension Row {
    /// Decodes the row into a `Decodable` type, matching coding keys to column names
    /// (case-insensitive). Properties whose type is ``DatabaseValueConvertible`` read the column
    /// directly; enums read their raw value; other nested types are decoded from JSON text.
    /// - Throws: `DecodingError` naming the column when a column is missing or does not convert.
    public func decode<T: Decodable>(_ type: T.Type = T.self) throws -> T {
        try T(from: RowDecoder(row: self, codingPath: []))
    }
}

extension Connection {
    /// Runs a query and decodes every row into `T` (see ``Row/decode(_:)``).
    /// - Throws: ``SQLiteError``, ``StatementError``, or `DecodingError`.
    public func query<T: Decodable>(_ type: T.Type, _ sql: String, _ arguments: StatementArguments = StatementArguments()) throws -> [T] {
        let statement = try cachedStatement(sql)
        try statement.bind(arguments)
        defer { statement.reset() }
        var result: [T] = []
        while try statement.step() { result.append(try statement.row.decode(T.self)) }
        return result
    }
}

/// A `Decoder` over one row: keyed by column name, or a single value when the row has one column.
struct RowDecoder: Decoder {
    let row: Row
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(RowKeyedContainer<Key>(row: row, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch([Any].self, .init(codingPath: codingPath, debugDescription: "a row decodes as a keyed value or a single column, not a list"))
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        guard row.count == 1 else {
            throw DecodingError.typeMismatch(Any.self, .init(codingPath: codingPath, debugDescription: "a single value needs a row of one column; this row has \(row.count)"))
        }
        return ValueDecoder(value: row[0], codingPath: codingPath)
    }
}

private struct RowKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let row: Row
    let codingPath: [any CodingKey]

    var allKeys: [Key] { row.columnNames.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { row[key.stringValue] != nil }

    private func value(_ key: Key) throws -> DatabaseValue {
        guard let value = row[key.stringValue] else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no column named \(key.stringValue); the row has \(row.columnNames.joined(separator: ", "))"))
        }
        return value
    }

    func decodeNil(forKey key: Key) throws -> Bool { (row[key.stringValue] ?? .null).isNull }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try ValueDecoder(value: try value(key), codingPath: codingPath + [key]).decode(T.self)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        throw DecodingError.typeMismatch(type, .init(codingPath: codingPath + [key], debugDescription: "nested containers are decoded from JSON text"))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch([Any].self, .init(codingPath: codingPath + [key], debugDescription: "nested containers are decoded from JSON text"))
    }

    func superDecoder() throws -> any Decoder { RowDecoder(row: row, codingPath: codingPath) }
    func superDecoder(forKey key: Key) throws -> any Decoder { RowDecoder(row: row, codingPath: codingPath + [key]) }
}

/// Decodes one column value: directly for ``DatabaseValueConvertible`` types, through the single
/// value container for types built on one (enums with raw values), from JSON text otherwise.
struct ValueDecoder: Decoder, SingleValueDecodingContainer {
    let value: DatabaseValue
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        try jsonDecoder(for: type).container(keyedBy: type)
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try jsonDecoder(for: [Any].self).unkeyedContainer()
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { value.isNull }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        if let convertible = type as? any DatabaseValueConvertible.Type {
            guard let converted = convertible.init(databaseValue: value) as? T else {
                throw DecodingError.typeMismatch(type, .init(codingPath: codingPath, debugDescription: "the column holds \(value.storageClassName), which does not convert to \(type)"))
            }
            return converted
        }
        if case .text(let json) = value, let first = json.first, first == "{" || first == "[" {
            return try JSONDecoder().decode(T.self, from: Data(json.utf8))
        }
        return try T(from: self)
    }

    private func jsonDecoder(for type: Any.Type) throws -> any Decoder {
        guard case .text(let json) = value else {
            throw DecodingError.typeMismatch(type, .init(codingPath: codingPath, debugDescription: "a nested value must be stored as JSON text; the column holds \(value.storageClassName)"))
        }
        return try JSONDecoder().decode(DecoderCapture.self, from: Data(json.utf8)).decoder
    }
}

/// Captures the `Decoder` JSONDecoder uses, to decode nested containers from JSON text.
private struct DecoderCapture: Decodable {
    let decoder: any Decoder
    init(from decoder: any Decoder) throws { self.decoder = decoder }
}
