/// Values to bind to a statement's parameters: either positional (`?`, `?NNN`) or named
/// (`:name`, `@name`, `$name`).
///
/// ```swift
/// try db.execute("INSERT INTO t(a, b) VALUES (?, ?)", [1, "one"])
/// try db.execute("INSERT INTO t(a, b) VALUES (:a, :b)", ["a": 1, "b": nil])
/// ```
///
/// Positional arguments fill parameter slots in order (`?NNN` is slot NNN); named arguments are
/// matched by name, with or without the leading `:`, `@` or `$`.
public struct StatementArguments: Sendable, Equatable, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    enum Storage: Sendable, Equatable {
        case positional([DatabaseValue])
        case named([String: DatabaseValue])
    }

    let storage: Storage

    /// No arguments.
    public init() { storage = .positional([]) }

    /// Positional arguments, in parameter order.
    public init(_ values: [(any DatabaseValueConvertible)?]) {
        storage = .positional(values.map { $0?.databaseValue ?? .null })
    }

    /// Named arguments; keys may carry the `:`, `@` or `$` prefix or not.
    public init(_ values: [String: (any DatabaseValueConvertible)?]) {
        var named: [String: DatabaseValue] = [:]
        for (key, value) in values { named[Self.bareName(key)] = value?.databaseValue ?? .null }
        storage = .named(named)
    }

    /// Positional arguments from an array literal; `nil` binds `NULL`.
    public init(arrayLiteral elements: (any DatabaseValueConvertible)?...) { self.init(elements) }

    /// Named arguments from a dictionary literal; `nil` binds `NULL`.
    public init(dictionaryLiteral elements: (String, (any DatabaseValueConvertible)?)...) {
        var values: [String: (any DatabaseValueConvertible)?] = [:]
        for (key, value) in elements { values[key] = value }
        self.init(values)
    }

    /// `true` when there is nothing to bind.
    public var isEmpty: Bool {
        switch storage {
        case .positional(let values): return values.isEmpty
        case .named(let values): return values.isEmpty
        }
    }

    static func bareName(_ name: String) -> String {
        guard let first = name.first, first == ":" || first == "@" || first == "$" else { return name }
        return String(name.dropFirst())
    }
}
