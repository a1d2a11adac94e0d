import SQLKit

/// The SQLKit dialect of the linked SQLite, answering from its version: what SQLKit may generate
/// (`RETURNING`, UPSERT, `TRUE`/`FALSE` literals) and what it must not, because the engine is
/// older than the feature.
///
/// SQLCipher 3.4.1 (Debian 12) carries SQLite 3.15.2, which lacks `RETURNING` (3.35.0), UPSERT
/// (3.24.0), `ALTER TABLE … DROP COLUMN` (3.35.0), window functions (3.25.0) and `TRUE`/`FALSE`
/// literals (3.23.0); SQLCipher 4.6.1 (Debian 13) carries SQLite 3.46. ``missingFeatures`` lists
/// the gaps of the version in use.
///
/// ```swift
/// let dialect = EncryptedSQLiteDialect()            // the linked engine
/// if !dialect.supportsReturning { /* read lastInsertRowID instead */ }
/// for gap in dialect.missingFeatures { print(gap.name, "needs SQLite", gap.since) }
/// ```
public struct EncryptedSQLiteDialect: SQLDialect {
    /// A SQL feature that SQLite added in some version, which SQLKit or Fluent may generate.
    ///
    /// ```swift
    /// if !EncryptedSQLiteDialect().supports(.dropColumn) {
    ///     print(EncryptedSQLiteDialect.Feature.dropColumn.name, "needs SQLite", EncryptedSQLiteDialect.Feature.dropColumn.since)
    /// }
    /// ```
    public struct Feature: Sendable, Equatable {
        /// Its name in SQLite's documentation, e.g. `RETURNING`.
        public let name: String
        /// The SQLite version that added it.
        public let since: SQLiteVersion

        /// `ON CONFLICT … DO` (SQLite 3.24.0).
        public static let upsert = Feature(name: "UPSERT (ON CONFLICT … DO)", since: SQLiteVersion(3, 24, 0))
        /// `RETURNING` (SQLite 3.35.0).
        public static let returning = Feature(name: "RETURNING", since: SQLiteVersion(3, 35, 0))
        /// `ALTER TABLE … DROP COLUMN` (SQLite 3.35.0).
        public static let dropColumn = Feature(name: "ALTER TABLE … DROP COLUMN", since: SQLiteVersion(3, 35, 0))
        /// Window functions, `OVER (…)` (SQLite 3.25.0).
        public static let windowFunctions = Feature(name: "window functions (OVER)", since: SQLiteVersion(3, 25, 0))
        /// The `TRUE` and `FALSE` literals (SQLite 3.23.0); older engines get `1` and `0`.
        public static let booleanLiterals = Feature(name: "TRUE and FALSE literals", since: SQLiteVersion(3, 23, 0))

        /// The JSON functions (`json_extract`, which nested-field paths use), built in from SQLite
        /// 3.38.0; before, an optional extension that Debian 12's SQLCipher 3.4.1 lacks.
        public static let jsonFunctions = Feature(name: "built-in JSON functions (json_extract)", since: SQLiteVersion(3, 38, 0))
        /// Up to 32766 bound parameters per statement (`SQLITE_MAX_VARIABLE_NUMBER`, SQLite 3.32.0;
        /// 999 before), which large batch inserts need.
        public static let manyParameters = Feature(name: "more than 999 bound parameters per statement", since: SQLiteVersion(3, 32, 0))

        /// Every feature the dialect answers for.
        public static let all: [Feature] = [.booleanLiterals, .upsert, .windowFunctions, .manyParameters, .returning, .dropColumn, .jsonFunctions]
    }

    /// The SQLite version the dialect answers for.
    public let version: SQLiteVersion

    /// The dialect of `version` (default: the SQLite linked into this process).
    public init(version: SQLiteVersion = .linked) {
        self.version = version
    }

    /// `true` when the engine has `feature`.
    public func supports(_ feature: Feature) -> Bool {
        version >= feature.since
    }

    /// The features of ``Feature/all`` that this engine lacks (empty on SQLite 3.35 and later).
    public var missingFeatures: [Feature] {
        Feature.all.filter { !supports($0) }
    }

    /// `sqlite`.
    public var name: String { "sqlite" }
    /// `"`.
    public var identifierQuote: any SQLExpression { SQLRaw(#"""#) }
    /// `'`.
    public var literalStringQuote: any SQLExpression { SQLRaw("'") }
    /// `?1`, `?2`, …
    public func bindPlaceholder(at position: Int) -> any SQLExpression { SQLRaw("?\(position)") }
    /// `TRUE`/`FALSE`, or `1`/`0` before SQLite 3.23.0.
    public func literalBoolean(_ value: Bool) -> any SQLExpression {
        supports(.booleanLiterals) ? SQLRaw(value ? "TRUE" : "FALSE") : SQLRaw(value ? "1" : "0")
    }
    /// `NULL`: SQLite has no `DEFAULT` in a values list.
    public var literalDefault: any SQLExpression { SQLLiteral.null }
    /// `true`.
    public var supportsIfExists: Bool { true }
    /// `false`.
    public var supportsDropBehavior: Bool { false }
    /// `false`: an `INTEGER PRIMARY KEY` is the rowid.
    public var supportsAutoIncrement: Bool { false }
    /// `AUTOINCREMENT`.
    public var autoIncrementClause: any SQLExpression { SQLRaw("AUTOINCREMENT") }
    /// `.unsupported`: enums are `TEXT`.
    public var enumSyntax: SQLEnumSyntax { .unsupported }
    /// Bodies, conditions and update columns.
    public var triggerSyntax: SQLTriggerSyntax {
        .init(create: [.supportsBody, .supportsCondition, .supportsUpdateColumns], drop: [])
    }
    /// One change per `ALTER TABLE`.
    public var alterTableSyntax: SQLAlterTableSyntax { .init(allowsBatch: false) }
    /// `.standard` from SQLite 3.24.0, else `.unsupported`.
    public var upsertSyntax: SQLUpsertSyntax { supports(.upsert) ? .standard : .unsupported }
    /// `true` from SQLite 3.35.0.
    public var supportsReturning: Bool { supports(.returning) }
    /// `UNION`, `UNION ALL`, `INTERSECT`, `EXCEPT`.
    public var unionFeatures: SQLUnionFeatures { [.union, .unionAll, .intersect, .except] }
    /// `BIGINT` becomes `INTEGER`, so a 64-bit primary key is the rowid.
    public func customDataType(for dataType: SQLDataType) -> (any SQLExpression)? {
        if case .bigint = dataType { return SQLDataType.int }
        return nil
    }
    /// `json_extract(column, '$.a.b')`.
    public func nestedSubpathExpression(in column: any SQLExpression, for path: [String]) -> (any SQLExpression)? {
        guard !path.isEmpty else { return nil }
        return SQLFunction("json_extract", args: [column, SQLLiteral.string("$.\(path.joined(separator: "."))")])
    }
}
