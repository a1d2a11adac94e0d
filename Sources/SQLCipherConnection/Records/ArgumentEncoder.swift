import Foundation

extension StatementArguments {
    /// Named arguments from an `Encodable` value: one argument per coding key, named after it.
    /// `nil` properties bind `NULL`; enums bind their raw value; other nested values bind as JSON text.
    /// - Throws: `EncodingError` when the value is not a keyed value (a struct or class).
    public init(encoding value: some Encodable) throws {
        let columns = try ColumnEncoder.columns(of: value)
        var named: [String: (any DatabaseValueConvertible)?] = [:]
        for (name, value) in columns { named[name] = value }
        self.init(named)
    }
}

/// Encodes a value into ordered (column, value) pairs.
enum ColumnEncoder {
    static func columns(of value: some Encodable) throws -> [(String, DatabaseValue)] {
        let storage = ColumnStorage()
        try value.encode(to: KeyedColumnEncoder(storage: storage))
        guard storage.isKeyed else {
            throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "only keyed values (structs, classes) encode as columns"))
        }
        return storage.columns
    }
}

private final class ColumnStorage {
    var columns: [(String, DatabaseValue)] = []
    var isKeyed = false

    func set(_ name: String, _ value: DatabaseValue) {
        if let index = columns.firstIndex(where: { $0.0 == name }) { columns[index].1 = value } else { columns.append((name, value)) }
    }
}

private struct KeyedColumnEncoder: Encoder {
    let storage: ColumnStorage
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        storage.isKeyed = true
        return KeyedEncodingContainer(ColumnContainer<Key>(storage: storage))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer { ValueEncoder().unkeyedContainer() }
    func singleValueContainer() -> any SingleValueEncodingContainer { ValueEncoder() }
}

private struct ColumnContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let storage: ColumnStorage
    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil(forKey key: Key) throws { storage.set(key.stringValue, .null) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        storage.set(key.stringValue, try ValueEncoder.databaseValue(of: value))
    }

    // Synthesized conformances skip nil optionals; a column must become NULL instead.
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { try encodeIfPresent(value as Bool?, key) }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { try encodeIfPresent(value as String?, key) }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws { try encodeIfPresent(value as Double?, key) }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws { try encodeIfPresent(value as Float?, key) }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { try encodeIfPresent(value as Int?, key) }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws { try encodeIfPresent(value as Int8?, key) }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws { try encodeIfPresent(value as Int16?, key) }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws { try encodeIfPresent(value as Int32?, key) }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { try encodeIfPresent(value as Int64?, key) }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws { try encodeIfPresent(value as UInt?, key) }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws { try encodeIfPresent(value as UInt8?, key) }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws { try encodeIfPresent(value as UInt16?, key) }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws { try encodeIfPresent(value as UInt32?, key) }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws { try encodeIfPresent(value as UInt64?, key) }

    private mutating func encodeIfPresent<T: Encodable>(_ value: T?, _ key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        ValueEncoder().container(keyedBy: keyType)
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { ValueEncoder().unkeyedContainer() }
    mutating func superEncoder() -> any Encoder { KeyedColumnEncoder(storage: storage) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { KeyedColumnEncoder(storage: storage) }
}

/// Turns one property value into a column value.
private final class ValueEncoder: Encoder, SingleValueEncodingContainer {
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    var result: DatabaseValue?

    static func databaseValue<T: Encodable>(of value: T) throws -> DatabaseValue {
        if let convertible = value as? any DatabaseValueConvertible { return convertible.databaseValue }
        // The other standard numbers (Int8…UInt64, Float): their own `encode(to:)` would hand
        // themselves to this encoder again, forever.
        if let integer = value as? any FixedWidthInteger {
            guard let wide = Int64(exactly: integer) else {
                throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "\(T.self) value does not fit a 64-bit SQLite integer"))
            }
            return .integer(wide)
        }
        if let float = value as? Float { return .real(Double(float)) }
        let encoder = ValueEncoder()
        do {
            try value.encode(to: encoder)
            if let result = encoder.result { return result }
        } catch is NotSingleValue {}
        // A nested keyed or unkeyed value: store it as JSON text.
        let data = try JSONEncoder().encode(value)
        return .text(String(decoding: data, as: UTF8.self))
    }

    struct NotSingleValue: Error {}

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(FailingKeyed<Key>())
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { FailingUnkeyed() }
    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    func encodeNil() throws { result = .null }
    func encode<T: Encodable>(_ value: T) throws { result = try Self.databaseValue(of: value) }
}

/// Containers that make ``ValueEncoder`` fall back to JSON for nested values.
private struct FailingKeyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
    var codingPath: [any CodingKey] { [] }
    mutating func encodeNil(forKey key: Key) throws { throw ValueEncoder.NotSingleValue() }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { throw ValueEncoder.NotSingleValue() }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(FailingKeyed<NestedKey>())
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { FailingUnkeyed() }
    mutating func superEncoder() -> any Encoder { ValueEncoder() }
    mutating func superEncoder(forKey key: Key) -> any Encoder { ValueEncoder() }
}

private struct FailingUnkeyed: UnkeyedEncodingContainer {
    var codingPath: [any CodingKey] { [] }
    var count: Int { 0 }
    mutating func encodeNil() throws { throw ValueEncoder.NotSingleValue() }
    mutating func encode<T: Encodable>(_ value: T) throws { throw ValueEncoder.NotSingleValue() }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(FailingKeyed<NestedKey>())
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { FailingUnkeyed() }
    mutating func superEncoder() -> any Encoder { ValueEncoder() }
}
