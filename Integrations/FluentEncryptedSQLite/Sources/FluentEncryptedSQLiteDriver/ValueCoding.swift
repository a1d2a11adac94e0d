import EncryptedSQLite
import Foundation
@_spi(CodableUtilities) import SQLKit

/// Turns SQLKit and Fluent binds into SQLite values, as fluent-sqlite-driver stores them: integers,
/// reals (`Date` as Unix seconds), text (`UUID` as its string), blobs (`Data`), `NULL`, and any
/// other `Codable` value that is not a single value (structs, arrays, dictionaries) as JSON text.
struct ValueEncoder: Sendable {
    let json: FakeSendableCodable<JSONEncoder>

    init(json: JSONEncoder = JSONEncoder()) {
        self.json = .init(json)
    }

    func encode(_ value: any Encodable) throws -> DatabaseValue {
        switch value {
        case let value as String: return .text(value)
        case let value as Int: return .integer(Int64(value))
        case let value as Int64: return .integer(value)
        case let value as Double: return .real(value)
        case let value as Bool: return .integer(value ? 1 : 0)
        case let value as Date: return .real(value.timeIntervalSince1970)
        case let value as UUID: return .text(value.uuidString)
        case let value as Data: return .blob([UInt8](value))
        case let value as Int32: return .integer(Int64(value))
        case let value as Float: return .real(Double(value))
        case let value as any FixedWidthInteger:
            // The other integer types (their Codable conformance encodes the value itself, so
            // they must not reach the unwrapping encoder).
            guard let number = Int64(exactly: value) else {
                throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "\(value) does not fit in SQLite's 64-bit integer"))
            }
            return .integer(number)
        default: break
        }
        let encoder = SingleValueUnwrappingEncoder(values: self)
        do {
            try value.encode(to: encoder)
            guard let result = encoder.value else { throw SQLCodingError.unsupportedOperation("no value", codingPath: []) }
            return result
        } catch is SQLCodingError {
            // Not a single value: JSON, as text (SQLite 3.45 reads JSON in a blob as JSONB).
            return .text(String(decoding: try json.value.encode(value), as: UTF8.self))
        }
    }

    /// Accepts one single value (an enum's raw value, a property wrapper's wrapped value, an
    /// optional) and refuses keyed and unkeyed containers, which go to JSON.
    private final class SingleValueUnwrappingEncoder: Encoder, SingleValueEncodingContainer {
        var codingPath: [any CodingKey] { [] }
        var userInfo: [CodingUserInfoKey: Any] { [:] }
        let values: ValueEncoder
        var value: DatabaseValue?

        init(values: ValueEncoder) { self.values = values }

        func container<K: CodingKey>(keyedBy: K.Type) -> KeyedEncodingContainer<K> { .invalid(at: codingPath) }
        func unkeyedContainer() -> any UnkeyedEncodingContainer { .invalid(at: codingPath) }
        func singleValueContainer() -> any SingleValueEncodingContainer { self }
        func encodeNil() throws { value = .null }
        func encode<T: Encodable>(_ value: T) throws { self.value = try values.encode(value) }
    }
}

/// Reads SQLite values back as the `Decodable` types Fluent and SQLKit ask for: the fast paths of
/// ``ValueEncoder``'s types, optionals (`NULL`), single-value wrappers, and JSON text otherwise.
struct ValueDecoder: Sendable {
    let json: FakeSendableCodable<JSONDecoder>

    init(json: JSONDecoder = JSONDecoder()) {
        self.json = .init(json)
    }

    func decode<T: Decodable>(_ type: T.Type, from value: DatabaseValue) throws -> T {
        if let direct = try decodeDirectly(type, from: value) { return direct }
        do {
            return try T(from: SingleValueUnwrappingDecoder(values: self, value: value))
        } catch is SQLCodingError {
            let data: Data
            switch value {
            case .text(let text): data = Data(text.utf8)
            case .blob(let bytes): data = Data(bytes)
            case .integer(let number): data = Data(String(number).utf8)
            case .real(let number): data = Data(String(number).utf8)
            case .null: data = Data("null".utf8)
            }
            return try json.value.decode(T.self, from: data)
        }
    }

    private func mismatch<T>(_ type: T.Type, _ value: DatabaseValue) -> DecodingError {
        DecodingError.typeMismatch(T.self, .init(codingPath: [], debugDescription: "Could not read SQLite value \(value) as \(T.self)."))
    }

    /// The types read without a `Decoder`; `nil` for the others.
    private func decodeDirectly<T>(_ type: T.Type, from value: DatabaseValue) throws -> T? {
        func integer() throws -> Int64 {
            switch value {
            case .integer(let number): return number
            case .real(let number) where number.rounded() == number && abs(number) < 9.2e18: return Int64(number)
            case .text(let text): if let number = Int64(text) { return number }
            default: break
            }
            throw mismatch(T.self, value)
        }
        func real() throws -> Double {
            switch value {
            case .real(let number): return number
            case .integer(let number): return Double(number)
            case .text(let text): if let number = Double(text) { return number }
            default: break
            }
            throw mismatch(T.self, value)
        }
        switch type {
        case is String.Type:
            switch value {
            case .text(let text): return text as? T
            case .integer(let number): return String(number) as? T
            case .real(let number): return String(number) as? T
            default: throw mismatch(T.self, value)
            }
        case is Int.Type:
            let number = try integer()
            guard let result = Int(exactly: number) else { throw mismatch(T.self, value) }
            return result as? T
        case is Int64.Type: return try integer() as? T
        case is Double.Type: return try real() as? T
        case is Bool.Type: return (try integer() != 0) as? T
        case is Date.Type:
            switch value {
            case .real(let seconds): return Date(timeIntervalSince1970: seconds) as? T
            case .integer(let seconds): return Date(timeIntervalSince1970: TimeInterval(seconds)) as? T
            case .text:
                guard let date = Date(databaseValue: value) else { throw mismatch(T.self, value) }
                return date as? T
            default: throw mismatch(T.self, value)
            }
        case is UUID.Type:
            switch value {
            case .text(let text): if let uuid = UUID(uuidString: text) { return uuid as? T }
            case .blob(let bytes) where bytes.count == 16:
                return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                                   bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15])) as? T
            default: break
            }
            throw mismatch(T.self, value)
        case is Data.Type:
            switch value {
            case .blob(let bytes): return Data(bytes) as? T
            case .text(let text): return Data(text.utf8) as? T
            default: throw mismatch(T.self, value)
            }
        case is Float.Type: return Float(try real()) as? T
        case is Int32.Type:
            guard let result = Int32(exactly: try integer()) else { throw mismatch(T.self, value) }
            return result as? T
        case is DatabaseValue.Type: return value as? T
        case let integerType as any FixedWidthInteger.Type:
            guard let result = integerType.init(exactly: try integer()) else { throw mismatch(T.self, value) }
            return result as? T
        default: return nil
        }
    }

    /// Hands one value to `init(from:)`: single values only; keyed and unkeyed containers throw
    /// `SQLCodingError`, and the value is then read as JSON.
    private struct SingleValueUnwrappingDecoder: Decoder, SingleValueDecodingContainer {
        var codingPath: [any CodingKey] { [] }
        var userInfo: [CodingUserInfoKey: Any] { [:] }
        let values: ValueDecoder
        let value: DatabaseValue

        func container<Key: CodingKey>(keyedBy: Key.Type) throws -> KeyedDecodingContainer<Key> { throw .invalid(at: codingPath) }
        func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw .invalid(at: codingPath) }
        func singleValueContainer() throws -> any SingleValueDecodingContainer { self }
        func decodeNil() -> Bool { value.isNull }
        func decode<T: Decodable>(_: T.Type) throws -> T { try values.decode(T.self, from: value) }
    }
}
