import Foundation

extension Row {
    /// Decodes the row into a `Decodable` type, matching coding keys to column names
    /// (case-insensitive). Properties whose type is ``DatabaseValueConvertible`` read the column
    /// directly; enums read their raw value; other nested types are decoded from JSON text.
    /// - Throws: `DecodingError` naming the column when a column is missing or does not convert.
    public func decode<T: Decodable>(_ type: T.Type = T.self) throws -> T {
        try T(from: ColumnsDecoder(row: self))
    }
}

/// Which column each name a statement's rows were asked for is (by ``StatementRow`` getters and
/// by decoding), remembered across rows.
///
/// Code that reads rows asks for the same names in the same order on every row (a synthesized
/// `init(from:)` always does), so the cache is a list of (name, column) in the order of the
/// requests: the n-th request of a row is checked against the n-th entry (one string comparison,
/// no hashing) and looked up again only when it differs.
@usableFromInline
struct ColumnRequestCache {
    /// The requests of the previous rows, in order: the name and its column (-1: no such column).
    @usableFromInline
    var entries: [(name: String, column: Int)] = []
    /// The number of requests the current row made so far.
    @usableFromInline
    var position = 0

    init() {}

    /// Starts a row (the statement stepped): the next request is the first.
    mutating func startRow() { position = 0 }

    /// The column recorded for the next request when it is for `name` (-1: no such column), or
    /// `nil` when this request differs from the one at the same place in the previous row (then
    /// ``record(_:column:)`` must follow).
    @inlinable @inline(__always)
    mutating func next(_ name: String) -> Int? {
        let index = position
        position = index &+ 1
        guard index < entries.count else { return nil }
        let entry = entries[index]
        return entry.name == name ? entry.column : nil
    }

    /// Records the column found for the request ``next(_:)`` missed.
    mutating func record(_ name: String, column: Int) {
        let index = position - 1
        if index < entries.count {
            entries[index] = (name, column)
        } else {
            entries.append((name, column))
        }
    }
}

/// A `Decoder` over one row: keyed by column name, or a single value when the row has one column.
///
/// It reads a ``Row``'s values, or a statement's current row in place. A class, so that handing
/// it to `init(from:)` copies nothing; a statement keeps one for all of its rows, and the keyed
/// container it makes for a coding-key type is kept too (it reads the statement's current row
/// whenever it is asked), so decoding a row allocates nothing but the decoded value's storage.
final class ColumnsDecoder: Decoder {
    /// The row decoded, when it is a ``Row``.
    private let row: Row?
    /// The statement whose current row is decoded. Not retained: the statement owns this decoder
    /// (``Statement/decodeRow(_:)``), and a decoder is only used while a decode runs.
    private let statement: Unmanaged<Statement>?
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    // Used by one decode at a time, on the statement's thread (see `Statement`).
    @exclusivity(unchecked)
    private var containerKeyType: ObjectIdentifier?
    @exclusivity(unchecked)
    private var container: AnyObject?

    /// A decoder of `row`.
    init(row: Row, codingPath: [any CodingKey] = []) {
        self.row = row
        statement = nil
        self.codingPath = codingPath
    }

    /// A decoder of `statement`'s current row, owned by `statement`.
    init(statement: Unmanaged<Statement>, codingPath: [any CodingKey] = []) {
        row = nil
        self.statement = statement
        self.codingPath = codingPath
    }

    /// A decoder of the same row, at `codingPath`.
    func decoder(at codingPath: [any CodingKey]) -> ColumnsDecoder {
        if let statement { return ColumnsDecoder(statement: statement, codingPath: codingPath) }
        return ColumnsDecoder(row: row!, codingPath: codingPath)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        if containerKeyType == ObjectIdentifier(Key.self), let container {
            return unsafeDowncast(container, to: KeptContainer<Key>.self).container
        }
        let made = KeyedDecodingContainer(ColumnsKeyedContainer<Key>(decoder: self))
        container = KeptContainer(made)
        containerKeyType = ObjectIdentifier(Key.self)
        return made
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch([Any].self, .init(codingPath: codingPath, debugDescription: "a row decodes as a keyed value or a single column, not a list"))
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        let count = layout.names.count
        guard count == 1 else {
            throw DecodingError.typeMismatch(Any.self, .init(codingPath: codingPath, debugDescription: "a single value needs a row of one column; this row has \(count)"))
        }
        return ValueDecoder(value: value(at: 0), codingPath: codingPath)
    }

    // MARK: Reading the row

    var layout: ColumnLayout {
        if let statement { return statement._withUnsafeGuaranteedRef { $0.layout } }
        return row!.layout
    }

    /// The column a coding key named `name` reads, or `nil` when there is none.
    @inline(__always)
    func column(forKey name: String) -> Int? {
        if let statement { return statement._withUnsafeGuaranteedRef { $0.column(forRequest: name) } }
        return row!.layout.index(of: name)
    }

    /// The value at a column index (in range).
    func value(at column: Int) -> DatabaseValue {
        if let statement { return statement._withUnsafeGuaranteedRef { $0.value(at: Int32(column)) } }
        return row!.values[column]
    }

    /// `true` when the value at a column index (in range) is `NULL`.
    func isNull(at column: Int) -> Bool {
        if let statement { return statement._withUnsafeGuaranteedRef { $0.isNull(at: Int32(column)) } }
        return row!.values[column].isNull
    }

    /// The value at a column index (in range) converted to `T`; `nil` with the value when it
    /// does not convert. Always inlined, so that it is compiled for each caller's concrete type.
    @inline(__always)
    func convert<T: DatabaseValueConvertible>(_ column: Int, to type: T.Type) -> (T?, DatabaseValue?) {
        if let statement {
            return statement._withUnsafeGuaranteedRef { $0.convertedValue(at: Int32(column), to: T.self) }
        }
        let value = row!.values[column]
        guard let converted = T(databaseValue: value) else { return (nil, value) }
        return (converted, nil)
    }
}

/// A keyed container kept by a ``ColumnsDecoder`` for its coding-key type.
private final class KeptContainer<Key: CodingKey> {
    let container: KeyedDecodingContainer<Key>
    init(_ container: KeyedDecodingContainer<Key>) { self.container = container }
}

/// The keyed container of a ``ColumnsDecoder``. It refers to its decoder without retaining it
/// (the decoder keeps the container, see ``ColumnsDecoder/container(keyedBy:)``), which also
/// makes it a plain value that the standard library's container box copies for free; like any
/// container, it is only used while its `init(from:)` runs.
private struct ColumnsKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoderReference: Unmanaged<ColumnsDecoder>

    init(decoder: ColumnsDecoder) { decoderReference = .passUnretained(decoder) }

    /// The decoder (retained: for the paths where that does not matter).
    private var decoder: ColumnsDecoder { decoderReference.takeUnretainedValue() }

    /// Runs `body` with the decoder borrowed: neither retained nor released, on the hot paths.
    @inline(__always)
    private func withDecoder<Result>(_ body: (ColumnsDecoder) throws -> Result) rethrows -> Result {
        try decoderReference._withUnsafeGuaranteedRef(body)
    }

    var codingPath: [any CodingKey] { decoder.codingPath }

    var allKeys: [Key] { decoder.layout.names.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool {
        let name = key.stringValue
        return withDecoder { $0.column(forKey: name) } != nil
    }

    @inline(__always)
    private func column(_ key: Key) throws -> Int {
        let name = key.stringValue
        guard let column = withDecoder({ $0.column(forKey: name) }) else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no column named \(key.stringValue); the row has \(decoder.layout.names.joined(separator: ", "))"))
        }
        return column
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        let name = key.stringValue
        return withDecoder { decoder in decoder.column(forKey: name).map { decoder.isNull(at: $0) } ?? true }
    }

    /// A column read straight into a ``DatabaseValueConvertible`` type (the common property
    /// types below; the generic `decode` reaches the same conversion through ``ValueDecoder``).
    /// Always inlined into those, so that it is compiled for each concrete type.
    @inline(__always)
    private func convert<T: DatabaseValueConvertible>(_ type: T.Type, _ key: Key) throws -> T {
        let column = try column(key)
        let (converted, mismatch) = withDecoder { $0.convert(column, to: T.self) }
        guard let converted else { throw ValueDecoder.mismatch(type, mismatch ?? .null, codingPath + [key]) }
        return converted
    }

    func decode(_ type: String.Type, forKey key: Key) throws -> String { try convert(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try convert(type, key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try convert(type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try convert(type, key) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try convert(type, key) }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try convert(type, key) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try ValueDecoder(value: decoder.value(at: try column(key)), codingPath: codingPath + [key]).decode(T.self)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        throw DecodingError.typeMismatch(type, .init(codingPath: codingPath + [key], debugDescription: "nested containers are decoded from JSON text"))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch([Any].self, .init(codingPath: codingPath + [key], debugDescription: "nested containers are decoded from JSON text"))
    }

    func superDecoder() throws -> any Decoder { decoder.decoder(at: codingPath) }
    func superDecoder(forKey key: Key) throws -> any Decoder { decoder.decoder(at: codingPath + [key]) }
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
            guard let converted = convertible.init(databaseValue: value) as? T else { throw Self.mismatch(type, value, codingPath) }
            return converted
        }
        // The other standard numbers (Int8…UInt64, Float): their own `init(from:)` would ask this
        // decoder for themselves again, forever.
        if let integer = type as? any FixedWidthInteger.Type {
            guard let wide = Int64(databaseValue: value), let exact = integer.init(exactly: wide) as? T else {
                throw Self.mismatch(type, value, codingPath)
            }
            return exact
        }
        if type == Float.self {
            guard let real = Double(databaseValue: value), let float = Float(real) as? T else { throw Self.mismatch(type, value, codingPath) }
            return float
        }
        if case .text(let json) = value, let first = json.first, first == "{" || first == "[" {
            return try JSONDecoder().decode(T.self, from: Data(json.utf8))
        }
        return try T(from: self)
    }

    /// The error for a column value that does not convert to `type`.
    static func mismatch(_ type: Any.Type, _ value: DatabaseValue, _ codingPath: [any CodingKey]) -> DecodingError {
        DecodingError.typeMismatch(type, .init(codingPath: codingPath, debugDescription: "the column holds \(value.storageClassName), which does not convert to \(AcceptedForms.describing(String(describing: type)))"))
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
