import EncryptedSQLite
import Foundation
import Testing
import TestSupport

@Suite("Migrations: the bookkeeping row commits with the migration's own changes")
struct MigrationBookkeepingTests {
    /// Version 1 of an application: one migration.
    private func versionOne() throws -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        try migrator.registerSQLMigration("0001_accounts", sql: "CREATE TABLE accounts(id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n")
        return migrator
    }

    /// Version 2: a Swift migration that changes an existing table and creates one, then an index.
    private func versionTwo() throws -> DatabaseMigrator {
        var migrator = try versionOne()
        try migrator.registerMigration("0002_seed") { db in
            try db.execute("INSERT INTO accounts(name) VALUES ('ann'), ('bob')")
            try db.execute("CREATE TABLE seeded(at TEXT)")
            try db.execute("INSERT INTO seeded VALUES ('now')")
        }
        try migrator.registerSQLMigration("0003_index", sql: "CREATE INDEX accounts_name ON accounts(name);\n")
        return migrator
    }

    @Test("when the bookkeeping insert of a migration fails, the migration's own changes are rolled back with it; once the cause is gone, a re-run applies it exactly once")
    func bookkeepingFailure() throws {
        let directory = TemporaryDirectory("migration-bookkeeping")
        let ring = TestKeyring([.hex], in: directory)
        let path = directory.file("app.sqlite")
        let key = ring.keys[0].shellKey
        func shell(_ sql: String) throws -> String {
            let result = try SQLCipherShell.run(path, key: key, sql)
            #expect(result.status == 0, "\(result.stderr)")
            return result.stdout
        }

        do {
            let first = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: OpenOptions(createIfMissing: true), migrator: versionOne())
            #expect(first.appliedMigrations == ["0001_accounts"])
        }
        // Only the bookkeeping row of 0002_seed is refused (through the independent shell).
        _ = try shell("""
            CREATE TRIGGER refuse_0002 BEFORE INSERT ON \(DatabaseMigrator.bookkeepingTable)
            WHEN new.identifier = '0002_seed' BEGIN SELECT RAISE(ABORT, 'bookkeeping of 0002_seed refused'); END;
            """)

        #expect {
            _ = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), migrator: versionTwo())
        } throws: { error in
            guard case .migrationFailed(path, .migrationFailed(let identifier, let statement, let reason)) = error as? EncryptedDatabaseError else { return false }
            return identifier == "0002_seed" && (statement ?? "").contains(DatabaseMigrator.bookkeepingTable) && reason.contains("refused")
        }
        // Neither the rows nor the table of 0002_seed, nor anything after it; only 0001 is recorded.
        let afterFailure = try shell("""
            SELECT count(*) FROM accounts;
            SELECT count(*) FROM sqlite_master WHERE name IN ('seeded', 'accounts_name');
            SELECT group_concat(identifier, ',') FROM (SELECT identifier FROM \(DatabaseMigrator.bookkeepingTable) ORDER BY identifier);
            """)
        #expect(afterFailure == "0\n0\n0001_accounts\n")
        #expect(!FileManager.default.fileExists(atPath: path + "-journal"))

        // The cause removed, the next open applies 0002_seed (once) and 0003_index.
        _ = try shell("DROP TRIGGER refuse_0002;")
        do {
            let second = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), migrator: versionTwo())
            #expect(second.appliedMigrations == ["0002_seed", "0003_index"])
        }
        do {
            let third = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), migrator: versionTwo())
            #expect(third.appliedMigrations.isEmpty)
        }
        let afterRerun = try shell("""
            SELECT count(*), group_concat(name, ',') FROM (SELECT name FROM accounts ORDER BY id);
            SELECT count(*) FROM seeded;
            SELECT group_concat(identifier, ',') FROM (SELECT identifier FROM \(DatabaseMigrator.bookkeepingTable) ORDER BY identifier);
            PRAGMA integrity_check;
            """)
        #expect(afterRerun == "2|ann,bob\n1\n0001_accounts,0002_seed,0003_index\nok\n")
    }
}
