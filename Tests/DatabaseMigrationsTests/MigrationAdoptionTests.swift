import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// The Migrations article's recipe for a database whose schema was built before it used the
/// migrator, run as written there.
@Suite("Migrations: adopting a database migrated before, as the Migrations article shows")
struct MigrationAdoptionTests {
    @Test("after recording the old migrations as applied, the migrator runs only the newer ones")
    func adoptThenMigrate() throws {
        let directory = TemporaryDirectory("adopt")
        let ring = TestKeyring([.hex], in: directory)
        let path = directory.file("app.sqlite")
        // The old app's schema, made with the independent shell: what 0001 and 0002 create.
        let made = try SQLCipherShell.run(path, key: ring.keys[0].shellKey, """
            CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT, email TEXT);
            INSERT INTO users(name, email) VALUES ('Ann', 'ANN@EXAMPLE.COM');
            """)
        #expect(made.status == 0, "\(made.stderr)")
        var migrator = DatabaseMigrator()
        try migrator.registerSQLMigration("0001_create_users", sql: "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT);")
        try migrator.registerSQLMigration("0002_add_email", sql: "ALTER TABLE users ADD COLUMN email TEXT;")
        try migrator.registerMigration("0003_lowercase", up: { db in try db.execute("UPDATE users SET email = lower(email)") })
        let keys = try ring.keyList(database: path)

        // Without adoption the first migration fails: its table exists.
        #expect(throws: EncryptedDatabaseError.self) { try EncryptedDatabase(path: path, keys: keys, migrator: migrator) }

        let database = try EncryptedDatabase(path: path, keys: keys)
        try database.write { db in
            try db.execute("""
                CREATE TABLE IF NOT EXISTS encryptedsqlite_migrations (
                    identifier TEXT PRIMARY KEY NOT NULL, checksum TEXT,
                    applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')))
                """)
            for identifier in ["0001_create_users", "0002_add_email"] {
                try db.execute("INSERT OR IGNORE INTO encryptedsqlite_migrations(identifier) VALUES (?)", [identifier])
            }
        }
        let applied = try database.writeWithoutTransaction { db in try migrator.migrate(db) }
        #expect(applied == ["0003_lowercase"])
        #expect(try database.read { try $0.queryValue("SELECT email FROM users", as: String.self) } == "ann@example.com")
        #expect(try database.read { try migrator.pendingIdentifiers($0) }.isEmpty)
    }
}
