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
/// `Data`, `[UInt8]`, `Date` and `Optional` of any of these (where `nil` is SQL `NULL`).
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

extension Date: DatabaseValueConvertible {
    /// Stored as text in SQLite's own `YYYY-MM-DD HH:MM:SS.SSS` UTC format, so that SQL date
    /// functions and sorting work on it.
    public var databaseValue: DatabaseValue { .text(SQLiteDateFormat.string(from: self)) }
    /// Accepts SQLite date text (`YYYY-MM-DD HH:MM[:SS[.SSS]]`, also with a `T`), or a number of
    /// seconds since 1970 (integer or real).
    public init?(databaseValue: DatabaseValue) {
        switch databaseValue {
        case .text(let text):
            guard let date = SQLiteDateFormat.date(from: text) else { return nil }
            self = date
        case .integer(let seconds): self = Date(timeIntervalSince1970: TimeInterval(seconds))
        case .real(let seconds): self = Date(timeIntervalSince1970: seconds)
        default: return nil
        }
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

/// SQLite's text date format, always UTC, millisecond precision.
enum SQLiteDateFormat {
    static func string(from date: Date) -> String {
        let milliseconds = (date.timeIntervalSince1970 * 1000).rounded()
        let seconds = Int64((milliseconds / 1000).rounded(.down))
        let millis = Int(milliseconds - Double(seconds) * 1000)
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        return String(
            format: "%04d-%02d-%02d %02d:%02d:%02d.%03d",
            Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
            Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), millis)
    }

    static func date(from text: String) -> Date? {
        // YYYY-MM-DD[ T]HH:MM[:SS[.fff]]  or  YYYY-MM-DD
        let scalars = Array(text.utf8)
        func number(_ start: Int, _ length: Int) -> Int? {
            guard start + length <= scalars.count else { return nil }
            var value = 0
            for byte in scalars[start..<start + length] {
                guard byte >= 48, byte <= 57 else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            return value
        }
        guard let year = number(0, 4), scalars.count >= 10, scalars[4] == 45, let month = number(5, 2),
              scalars[7] == 45, let day = number(8, 2) else { return nil }
        var hour = 0, minute = 0, second = 0
        var fraction = 0.0
        if scalars.count > 10 {
            guard scalars[10] == 32 || scalars[10] == 84, let h = number(11, 2), scalars.count >= 16,
                  scalars[13] == 58, let m = number(14, 2) else { return nil }
            hour = h
            minute = m
            if scalars.count > 16 {
                guard scalars[16] == 58, let s = number(17, 2) else { return nil }
                second = s
                if scalars.count > 19 {
                    guard scalars[19] == 46, scalars.count > 20 else { return nil }
                    var scale = 0.1
                    for byte in scalars[20...] {
                        guard byte >= 48, byte <= 57 else { return nil }
                        fraction += Double(byte - 48) * scale
                        scale /= 10
                    }
                }
            }
        }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        let seconds = timegm(&parts)
        return Date(timeIntervalSince1970: TimeInterval(seconds) + fraction)
    }
}
