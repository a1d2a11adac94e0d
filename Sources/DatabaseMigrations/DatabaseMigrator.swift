import Foundation
import SQLCipherConnection

/// Applies an ordered set of migrations to a database, each in its own `IMMEDIATE` transaction
/// together with its bookkeeping row, so that a failure or a crash leaves the database exactly at
/// the previous migration.
///
/// ```swift
/// var migrator = DatabaseMigrator()
/// try migrator.registerSQLMigrations(in: "Migrations")          // 0001_create_users.sql, …
/// try migrator.registerMigration("0003_backfill") { db in
///     try db.execute("UPDATE users SET email = lower(email)")
/// }
/// try database.writeWithoutTransaction { db in _ = try migrator.migrate(db) }
/// ```
///
/// Before changing anything, the migrator refuses a database that has applied migrations this code
/// does not know (it was migrated by a newer version of the application) and applied SQL
/// migrations whose text was edited since. After each migration's step it runs
/// `PRAGMA foreign_key_check`; violations roll the migration back.
///
/// Foreign keys: when the connection enforces them (`EncryptedDatabase` turns enforcement on
/// by default) and no transaction is open, the migrator turns enforcement off while it migrates
/// and back on afterwards, as GRDB's does, so that a migration can rebuild a table (create a new
/// one, copy the rows, drop the old one, rename) without the drop deleting or refusing the rows
/// that refer to it; the `foreign_key_check` before each commit still catches what a migration
/// breaks. Inside a transaction SQLite cannot change enforcement, so run the migrator outside one
/// (the open's `migrator:`, or `writeWithoutTransaction`).
///
/// Bookkeeping lives in the table `encryptedsqlite_migrations` (identifier, checksum, applied_at).
/// Statements that SQLite refuses or ignores inside a transaction (`VACUUM`, changing
/// `journal_mode` or `foreign_keys`) cannot be part of a migration.
public struct DatabaseMigrator: Sendable {
    /// The bookkeeping table's name.
    public static let bookkeepingTable = "encryptedsqlite_migrations"

    /// The registered migrations, in the order they run.
    public private(set) var migrations: [Migration] = []
    /// Optional SQL that creates a fresh database's schema in one step.
    public var installScript: InstallScript?

    /// An empty migrator.
    public init() {}

    /// Registers a migration written in Swift; `down`, when given, reverts it.
    /// - Throws: ``MigrationError/duplicateIdentifier(_:)`` or ``MigrationError/emptyIdentifier``.
    public mutating func registerMigration(
        _ identifier: String, up: @escaping @Sendable (Connection) throws -> Void, down: (@Sendable (Connection) throws -> Void)? = nil
    ) throws(MigrationError) {
        try add(Migration(identifier: identifier, sourceFile: nil, checksum: nil, body: .swift(up: up, down: down)))
    }

    /// Registers a migration from SQL text, with an optional down section after a `-- down` line.
    /// Its checksum is recorded, so later edits of an applied migration are detected.
    /// - Throws: ``MigrationError``.
    public mutating func registerSQLMigration(_ identifier: String, sql: String) throws(MigrationError) {
        let (up, down) = SQLMigrationFile.sections(of: sql)
        guard !up.isEmpty else { throw .emptyMigration(identifier: identifier) }
        try add(Migration(identifier: identifier, sourceFile: nil, checksum: MigrationChecksum.of(sql), body: .sql(up: up, down: down)))
    }

    /// Registers every `<version>_<name>.sql` file of a folder; the identifier is the file name
    /// without `.sql`. A `.sql` file without a version prefix is an error rather than skipped.
    /// - Throws: ``MigrationError``.
    public mutating func registerSQLMigrations(in folder: String) throws(MigrationError) {
        for migration in try SQLMigrationFile.load(folder: folder) { try add(migration) }
    }

    private mutating func add(_ migration: Migration) throws(MigrationError) {
        guard !migration.identifier.isEmpty else { throw .emptyIdentifier }
        guard !migrations.contains(where: { $0.identifier == migration.identifier }) else {
            throw .duplicateIdentifier(migration.identifier)
        }
        migrations.append(migration)
        migrations.sort { MigrationOrder.precedes($0.identifier, $1.identifier) }
    }

    // MARK: Introspection

    /// The identifiers of the applied migrations, in migration order.
    /// - Throws: ``SQLiteError``.
    public func appliedIdentifiers(_ db: Connection) throws -> [String] {
        try appliedRecords(db).map(\.identifier).sorted(by: MigrationOrder.precedes)
    }

    /// The identifiers of the registered migrations not applied yet, in order.
    /// - Throws: ``SQLiteError``.
    public func pendingIdentifiers(_ db: Connection) throws -> [String] {
        let applied = Set(try appliedRecords(db).map(\.identifier))
        return migrations.map(\.identifier).filter { !applied.contains($0) }
    }

    /// The last applied migration in migration order, or `nil` when none is.
    /// - Throws: ``SQLiteError``.
    public func currentIdentifier(_ db: Connection) throws -> String? {
        try appliedIdentifiers(db).last
    }

    // MARK: Migrating

    /// Applies the pending migrations in order, up to and including `target` (all when `nil`).
    ///
    /// - Returns: the identifiers applied by this call.
    /// - Throws: ``MigrationError``: refusals (unknown applied migrations, edited applied SQL,
    ///   unknown target) change nothing; a failing migration is rolled back and the ones before
    ///   it stay applied.
    @discardableResult
    public func migrate(_ db: Connection, upTo target: String? = nil) throws(MigrationError) -> [String] {
        if let target, !migrations.contains(where: { $0.identifier == target }) { throw .unknownTarget(target, database: db.path) }
        return try withoutForeignKeyEnforcement(db) { () throws(MigrationError) -> [String] in try applyPending(db, upTo: target) }
    }

    private func applyPending(_ db: Connection, upTo target: String?) throws(MigrationError) -> [String] {
        let applied = try validatedAppliedRecords(db)
        var appliedIDs = Set(applied.map(\.identifier))
        var done: [String] = []
        if applied.isEmpty, let installScript, try isEmptyDatabase(db) {
            done = try install(installScript, on: db)
            appliedIDs.formUnion(done)
        }
        for migration in migrations where !appliedIDs.contains(migration.identifier) {
            if let target, MigrationOrder.precedes(target, migration.identifier) { break }
            try run(migration.identifier, on: db) { db in
                try migration.runUp(db)
                try checkForeignKeys(db, identifier: migration.identifier)
                try db.execute("INSERT INTO \(Self.bookkeepingTable) (identifier, checksum) VALUES (?, ?)", [migration.identifier, migration.checksum])
            }
            done.append(migration.identifier)
        }
        return done
    }

    /// Reverts applied migrations after `target` (all of them when `nil`), newest first, each in
    /// its own transaction with the removal of its bookkeeping row.
    ///
    /// - Returns: the identifiers reverted by this call.
    /// - Throws: ``MigrationError``; before reverting anything, ``MigrationError/irreversible(identifier:)``
    ///   when one of them has no down step.
    @discardableResult
    public func migrate(_ db: Connection, downTo target: String?) throws(MigrationError) -> [String] {
        if let target, !migrations.contains(where: { $0.identifier == target }) { throw .unknownTarget(target, database: db.path) }
        return try withoutForeignKeyEnforcement(db) { () throws(MigrationError) -> [String] in try revert(db, downTo: target) }
    }

    private func revert(_ db: Connection, downTo target: String?) throws(MigrationError) -> [String] {
        let applied = Set(try validatedAppliedRecords(db).map(\.identifier))
        let toRevert = migrations.filter { migration in
            applied.contains(migration.identifier) && (target.map { MigrationOrder.precedes($0, migration.identifier) } ?? true)
        }.reversed()
        if let blocked = toRevert.first(where: { !$0.isReversible }) { throw .irreversible(identifier: blocked.identifier) }
        var done: [String] = []
        for migration in toRevert {
            try run(migration.identifier, on: db) { db in
                try migration.runDown(db)
                try checkForeignKeys(db, identifier: migration.identifier)
                try db.execute("DELETE FROM \(Self.bookkeepingTable) WHERE identifier = ?", [migration.identifier])
            }
            done.append(migration.identifier)
        }
        return done
    }

    // MARK: Steps

    /// Runs `body` with foreign-key enforcement off when it is on and no transaction is open (SQLite
    /// ignores the pragma inside one), and turns it back on afterwards.
    private func withoutForeignKeyEnforcement<T>(_ db: Connection, _ body: () throws(MigrationError) -> T) throws(MigrationError) -> T {
        let enforced: Bool
        do {
            enforced = try !db.isInTransaction && db.queryValue("PRAGMA foreign_keys", as: Bool.self) == true
            if enforced { try db.execute("PRAGMA foreign_keys = OFF") }
        } catch {
            throw .migrationFailed(identifier: "(foreign keys)", statement: "PRAGMA foreign_keys", reason: "\(error)")
        }
        defer { if enforced { try? db.execute("PRAGMA foreign_keys = ON") } }
        return try body()
    }

    private struct AppliedRecord {
        let identifier: String
        let checksum: String?
    }

    private func appliedRecords(_ db: Connection) throws -> [AppliedRecord] {
        let exists = try db.queryValue("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", [Self.bookkeepingTable], as: Int.self) ?? 0
        guard exists > 0 else { return [] }
        return try db.query("SELECT identifier, checksum FROM \(Self.bookkeepingTable)").map {
            AppliedRecord(identifier: try $0.get(0, as: String.self), checksum: try $0.get(1, as: String?.self))
        }
    }

    /// The applied records, after refusing unknown ones and edited SQL migrations.
    private func validatedAppliedRecords(_ db: Connection) throws(MigrationError) -> [AppliedRecord] {
        let records: [AppliedRecord]
        do {
            records = try appliedRecords(db)
        } catch {
            throw .migrationFailed(identifier: "(bookkeeping)", statement: (error as? SQLiteError)?.sql, reason: "\(error)")
        }
        let known = Dictionary(uniqueKeysWithValues: migrations.map { ($0.identifier, $0) })
        let unknown = records.map(\.identifier).filter { known[$0] == nil }.sorted(by: MigrationOrder.precedes)
        if !unknown.isEmpty { throw .unknownAppliedMigrations(unknown) }
        for record in records {
            guard let migration = known[record.identifier], let current = migration.checksum, let recorded = record.checksum else { continue }
            if current != recorded {
                throw .checksumMismatch(identifier: record.identifier, file: migration.sourceFile, recorded: recorded, current: current)
            }
        }
        return records
    }

    private func isEmptyDatabase(_ db: Connection) throws(MigrationError) -> Bool {
        do {
            return (try db.queryValue("SELECT count(*) FROM sqlite_master", as: Int.self) ?? 0) == 0
        } catch {
            throw .migrationFailed(identifier: "(install)", statement: nil, reason: "\(error)")
        }
    }

    private func install(_ script: InstallScript, on db: Connection) throws(MigrationError) -> [String] {
        guard let last = migrations.firstIndex(where: { $0.identifier == script.coversThrough }) else {
            throw .installScriptCoversUnknown(script.coversThrough)
        }
        let covered = migrations[...last]
        try run("(install script)", on: db) { db in
            try db.execute(script.sql)
            try checkForeignKeys(db, identifier: "(install script)")
            try createBookkeepingTable(db)
            for migration in covered {
                try db.execute("INSERT INTO \(Self.bookkeepingTable) (identifier, checksum) VALUES (?, ?)", [migration.identifier, migration.checksum])
            }
        }
        return covered.map(\.identifier)
    }

    /// Runs one step in an IMMEDIATE transaction (a savepoint when the caller already opened a
    /// transaction), mapping failures to ``MigrationError``.
    private func run(_ identifier: String, on db: Connection, _ step: (Connection) throws -> Void) throws(MigrationError) {
        do {
            try db.transaction(.immediate) { db in
                try createBookkeepingTable(db)
                try step(db)
            }
        } catch let error as MigrationError {
            throw error
        } catch let error as SQLiteError {
            throw .migrationFailed(identifier: identifier, statement: error.sql, reason: "SQLite error \(error.code.rawValue): \(error.message)")
        } catch {
            throw .migrationFailed(identifier: identifier, statement: nil, reason: "\(error)")
        }
    }

    private func createBookkeepingTable(_ db: Connection) throws {
        try db.execute("""
            CREATE TABLE IF NOT EXISTS \(Self.bookkeepingTable) (
                identifier TEXT PRIMARY KEY NOT NULL,
                checksum TEXT,
                applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
            )
            """)
    }

    private func checkForeignKeys(_ db: Connection, identifier: String) throws {
        let rows = try db.query("PRAGMA foreign_key_check")
        guard !rows.isEmpty else { return }
        let violations = rows.map { row in
            let table = (try? row.get(0, as: String.self)) ?? "?"
            let rowid = (try? row.get(1, as: Int64?.self)).flatMap { $0 }.map(String.init) ?? "?"
            let parent = (try? row.get(2, as: String.self)) ?? "?"
            return "\(table) row \(rowid) references missing \(parent)"
        }
        throw MigrationError.foreignKeyViolations(identifier: identifier, violations: violations)
    }
}
