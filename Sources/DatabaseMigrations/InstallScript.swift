import Foundation

/// SQL that creates a fresh database's whole schema in one step, standing in for the migrations
/// up to and including ``coversThrough``.
///
/// On a database with no schema at all, the migrator runs the script instead of those
/// migrations and records them as applied (with their checksums); later migrations then run as
/// usual. On any other database the script is ignored.
///
/// ```swift
/// migrator.installScript = try InstallScript(contentsOf: "schema.sql", coversThrough: "0042_add_index")
/// ```
public struct InstallScript: Sendable {
    /// The SQL.
    public let sql: String
    /// The last migration the script's schema includes.
    public let coversThrough: String

    /// A script from SQL text.
    public init(sql: String, coversThrough: String) {
        self.sql = sql
        self.coversThrough = coversThrough
    }

    /// A script from a file.
    /// - Throws: ``MigrationError/fileUnreadable(path:)``.
    public init(contentsOf path: String, coversThrough: String) throws(MigrationError) {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw .fileUnreadable(path: path)
        }
        self.init(sql: text, coversThrough: coversThrough)
    }
}
