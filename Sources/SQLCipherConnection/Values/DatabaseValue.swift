import Foundation

/// One SQLite value, as stored in a column or bound to a parameter.
///
/// SQLite has five storage classes; `DatabaseValue` mirrors them exactly so that nothing is
/// converted behind your back. Use ``DatabaseValueConvertible`` to move between these values and
/// Swift types.
///
/// ```swift
/// if case .text(let name)? = try db.queryOne("SELECT name FROM users WHERE id = ?", [1])?[0] {
///     print(name)
/// }
/// ```
public enum DatabaseValue: Sendable, Hashable {
    /// SQL `NULL`.
    case null
    /// A 64-bit signed integer.
    case integer(Int64)
    /// A 64-bit IEEE floating point number.
    case real(Double)
    /// UTF-8 text.
    case text(String)
    /// Raw bytes.
    case blob([UInt8])

    /// `true` for SQL `NULL`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}

extension DatabaseValue: CustomStringConvertible {
    /// A short, type-tagged rendering such as `integer(42)`; blobs show their length only.
    public var description: String {
        switch self {
        case .null: return "NULL"
        case .integer(let value): return "integer(\(value))"
        case .real(let value): return "real(\(value))"
        case .text(let value): return "text(\(value.debugDescription))"
        case .blob(let bytes): return "blob(\(bytes.count) bytes)"
        }
    }
}

/// A Swift type that can be stored in, and read back from, a SQLite column.
///
/// The library provides conformances for `Int64`, `Int`, `Int32`, `Double`, `String`, `Bool`,
/// `Data`, `[UInt8]`, `Date`, `UUID` and `Optional` of any of these (where `nil` is SQL `NULL`).
///
/// ```swift
/// struct Email: DatabaseValueConvertible {
///     let address: String
///     init(address: String) { self.address = address }
///     var databaseValue: DatabaseValue { .text(address) }
///     init?(databaseValue: DatabaseValue) {
///         guard case .text(let text) = databaseValue else { return nil }
///         address = text
///     }
/// }
/// try db.execute("INSERT INTO users(email) VALUES (?)", [Email(address: "ann@example.com")])
/// ```
public protocol DatabaseValueConvertible: Sendable {
    /// The value to bind or store.
    var databaseValue: DatabaseValue { get }
    /// Creates a value from a column value, or returns `nil` when the column's value cannot
    /// represent this type (for example text read as `Int64`, or `NULL` read as `String`).
    init?(databaseValue: DatabaseValue)
}

extension DatabaseValue: DatabaseValueConvertible {
    /// The value itself.
    public var databaseValue: DatabaseValue { self }
    /// Wraps any value, including `NULL`.
    public init?(databaseValue: DatabaseValue) { self = databaseValue }
}

extension Int64: DatabaseValueConvertible {
    /// `.integer(self)`.
    @inlinable
    public var databaseValue: DatabaseValue { .integer(self) }
    /// Accepts integers, and reals that hold a whole number in range.
    public init?(databaseValue: DatabaseValue) {
        switch databaseValue {
        case .integer(let value): self = value
        case .real(let value):
            guard let exact = Int64(exactly: value) else { return nil }
            self = exact
        default: return nil
        }
    }
}

extension Int: DatabaseValueConvertible {
    /// `.integer(Int64(self))`.
    @inlinable
    public var databaseValue: DatabaseValue { .integer(Int64(self)) }
    /// Accepts what `Int64` accepts, when it fits.
    public init?(databaseValue: DatabaseValue) {
        guard let wide = Int64(databaseValue: databaseValue), let value = Int(exactly: wide) else { return nil }
        self = value
    }
}

extension Int32: DatabaseValueConvertible {
    /// `.integer(Int64(self))`.
    @inlinable
    public var databaseValue: DatabaseValue { .integer(Int64(self)) }
    /// Accepts what `Int64` accepts, when it fits.
    public init?(databaseValue: DatabaseValue) {
        guard let wide = Int64(databaseValue: databaseValue), let value = Int32(exactly: wide) else { return nil }
        self = value
    }
}

extension Double: DatabaseValueConvertible {
    /// `.real(self)`.
    @inlinable
    public var databaseValue: DatabaseValue { .real(self) }
    /// Accepts reals and integers.
    public init?(databaseValue: DatabaseValue) {
        switch databaseValue {
        case .real(let value): self = value
        case .integer(let value): self = Double(value)
        default: return nil
        }
    }
}

extension String: DatabaseValueConvertible {
    /// `.text(self)`.
    @inlinable
    public var databaseValue: DatabaseValue { .text(self) }
    /// Accepts text only.
    public init?(databaseValue: DatabaseValue) {
        guard case .text(let value) = databaseValue else { return nil }
        self = value
    }
}

extension Bool: DatabaseValueConvertible {
    /// `.integer(1)` or `.integer(0)`, as SQLite stores booleans.
    @inlinable
    public var databaseValue: DatabaseValue { .integer(self ? 1 : 0) }
    /// Accepts integers: 0 is `false`, anything else `true`.
    public init?(databaseValue: DatabaseValue) {
        guard case .integer(let value) = databaseValue else { return nil }
        self = value != 0
    }
}

extension Array: DatabaseValueConvertible where Element == UInt8 {
    /// `.blob(self)`.
    public var databaseValue: DatabaseValue { .blob(self) }
    /// Accepts blobs, and text as its UTF-8 bytes.
    public init?(databaseValue: DatabaseValue) {
        switch databaseValue {
        case .blob(let bytes): self = bytes
        case .text(let text): self = Array(text.utf8)
        default: return nil
        }
    }
}

extension Data: DatabaseValueConvertible {
    /// `.blob` of the same bytes.
    public var databaseValue: DatabaseValue { .blob([UInt8](self)) }
    /// Accepts what `[UInt8]` accepts.
    public init?(databaseValue: DatabaseValue) {
        guard let bytes = [UInt8](databaseValue: databaseValue) else { return nil }
        self = Data(bytes)
    }
}

extension Optional: DatabaseValueConvertible where Wrapped: DatabaseValueConvertible {
    /// `NULL` for `nil`, the wrapped value's otherwise.
    public var databaseValue: DatabaseValue { self?.databaseValue ?? .null }
    /// `nil` for `NULL`; otherwise the wrapped type's conversion, failing when that fails.
    public init?(databaseValue: DatabaseValue) {
        if databaseValue.isNull {
            self = .none
        } else if let value = Wrapped(databaseValue: databaseValue) {
            self = .some(value)
        } else {
            return nil
        }
    }
}

/// What the types that read several stored forms accept, for the errors of a value that does not
/// convert (`nil` for the other types, whose accepted forms their name says).
enum AcceptedForms {
    /// The accepted forms of the type named `typeName` (as `String(describing:)` names it,
    /// optional or not).
    static func of(_ typeName: String) -> String? {
        switch typeName {
        case "Date", "Optional<Date>": return SQLiteDateFormat.acceptedForms
        case "UUID", "Optional<UUID>": return UUID.acceptedForms
        default: return nil
        }
    }

    /// `typeName`, followed by what it accepts when it reads several forms.
    static func describing(_ typeName: String) -> String {
        of(typeName).map { "\(typeName) (which reads \($0))" } ?? typeName
    }
}
