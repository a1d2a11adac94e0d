import Foundation
/// Why migrations could not be registered or applied. When a migration fails, the database is
/// left exactly as it was after the previous migration.
///
/// ```swift
/// do {
///     _ = try migrator.migrate(db)
/// } catch MigrationError.unknownAppliedMigrations(let identifiers) {
///     print("this database was migrated by a newer version of the app: \(identifiers)")
/// }
/// ```
public enum MigrationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Two migrations have the same identifier.
    case duplicateIdentifier(String)
    /// An identifier is empty.
    case emptyIdentifier
    /// A migration has no SQL in its up section.
    case emptyMigration(identifier: String)
    /// A `.sql` file's name lacks the `<version>_<name>.sql` form.
    case invalidFileName(path: String)
    /// The migrations folder cannot be listed.
    case folderUnreadable(path: String, reason: String)
    /// A migration file cannot be read as UTF-8 text.
    case fileUnreadable(path: String)
    /// `upTo`/`downTo` names a migration the migrator does not have; `database` is the path of
    /// the connection it was asked to migrate.
    case unknownTarget(String, database: String)
    /// The install script says it covers a migration the migrator does not have.
    case installScriptCoversUnknown(String)
    /// The database records applied migrations this code does not know: it was migrated by a
    /// newer version of the application.
    case unknownAppliedMigrations([String])
    /// An applied SQL migration's text changed since it was applied.
    case checksumMismatch(identifier: String, file: String?, recorded: String, current: String)
    /// A migration to revert has no down step.
    case irreversible(identifier: String)
    /// A migration's step failed; `statement` is the SQL that failed, when known.
    case migrationFailed(identifier: String, statement: String?, reason: String)
    /// After a migration's step, `PRAGMA foreign_key_check` found violations.
    case foreignKeyViolations(identifier: String, violations: [String])

    /// What happened, which migration, and what to do.
    public var description: String {
        switch self {
        case .duplicateIdentifier(let id):
            return "two migrations have the identifier \"\(id)\"; identifiers must be unique: rename one"
        case .emptyIdentifier:
            return "a migration has an empty identifier; give it one such as 0001_create_users"
        case .emptyMigration(let id):
            return "migration \(id) has no SQL before its -- down line; put the migration's SQL above that line"
        case .invalidFileName(let path):
            return "migration file \(path) must be named <version>_<name>.sql, e.g. 0001_create_users.sql"
        case let .folderUnreadable(path, reason):
            return "cannot list the migrations folder \(path): \(reason)"
        case .fileUnreadable(let path):
            return "cannot read migration file \(path) as UTF-8 text; check that it is readable and save it as UTF-8"
        case let .unknownTarget(id, database):
            return "\(database): there is no migration \"\(id)\" to migrate to; check the identifier against the registered migrations. Nothing was changed."
        case .installScriptCoversUnknown(let id):
            return "the install script covers migrations through \"\(id)\", which is not registered; register that migration or correct coversThrough"
        case .unknownAppliedMigrations(let ids):
            return "the database has applied migrations this code does not know (\(ids.joined(separator: ", "))): it was migrated by a newer version of the application; run that version, or restore a backup. Nothing was changed."
        case let .checksumMismatch(id, file, recorded, current):
            return "migration \(id)\(file.map { " (\($0))" } ?? "") was edited after it was applied (checksum \(recorded) recorded, \(current) now); restore its original text and put the change in a new migration. Nothing was changed."
        case .irreversible(let id):
            return "migration \(id) has no down step, so it cannot be reverted. Nothing was changed."
        case let .migrationFailed(id, statement, reason):
            return "migration \(id) failed\(statement.map { " at: \($0)" } ?? ""): \(reason). The database is as it was before this migration; fix the migration and run it again."
        case let .foreignKeyViolations(id, violations):
            return "migration \(id) leaves foreign-key violations (\(violations.prefix(5).joined(separator: "; "))); it was rolled back: fix the data or the migration and run it again"
        }
    }
}

extension MigrationError: LocalizedError {
    /// The same text as ``description``, so that `localizedDescription` says what happened and what
    /// to do.
    public var errorDescription: String? { description }
}
