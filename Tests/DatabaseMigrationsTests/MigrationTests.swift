import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// A migrations folder with SQL files, written by the test.
struct MigrationsFolder {
    let directory = TemporaryDirectory("migrations")
    var path: String { directory.path }

    func write(_ name: String, _ sql: String) {
        _ = FileManager.default.createFile(atPath: directory.file(name), contents: Data(sql.utf8))
    }

    static func standard() -> MigrationsFolder {
        let folder = MigrationsFolder()
        folder.write("0001_create_users.sql", "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n-- down\nDROP TABLE users;\n")
        folder.write("0002_add_email.sql", "ALTER TABLE users ADD COLUMN email TEXT;\nCREATE INDEX users_email ON users(email);\n-- down\nDROP INDEX users_email;\nCREATE TABLE users_old(id INTEGER PRIMARY KEY, name TEXT NOT NULL);\nINSERT INTO users_old SELECT id, name FROM users;\nDROP TABLE users;\nALTER TABLE users_old RENAME TO users;\n")
        folder.write("0010_create_posts.sql", "CREATE TABLE posts(id INTEGER PRIMARY KEY, user INTEGER NOT NULL REFERENCES users(id), body TEXT);\n-- down\nDROP TABLE posts;\n")
        folder.write("README.txt", "not a migration")
        return folder
    }
}

func standardMigrator(_ folder: MigrationsFolder) throws -> DatabaseMigrator {
    var migrator = DatabaseMigrator()
    try migrator.registerSQLMigrations(in: folder.path)
    try migrator.registerMigration("0003_seed", up: { db in
        try db.execute("INSERT INTO users(name, email) VALUES ('ann', 'ANN@EXAMPLE.COM'), ('bob', NULL)")
    }, down: { db in
        try db.execute("DELETE FROM users WHERE name IN ('ann', 'bob')")
    })
    return migrator
}

@Suite("Migrations")
struct MigrationTests {
    @Test("SQL files and Swift migrations run mixed, in version order, once; introspection follows")
    func orderAndIdempotence() throws {
        let folder = MigrationsFolder.standard()
        let migrator = try standardMigrator(folder)
        #expect(migrator.migrations.map(\.identifier) == ["0001_create_users", "0002_add_email", "0003_seed", "0010_create_posts"])
        let scratch = try Scratch()
        try scratch.run { (db: Connection) throws in
            #expect(try migrator.pendingIdentifiers(db).count == 4)
            #expect(try migrator.currentIdentifier(db) == nil)
            #expect(try migrator.migrate(db, upTo: "0003_seed") == ["0001_create_users", "0002_add_email", "0003_seed"])
            #expect(try migrator.currentIdentifier(db) == "0003_seed")
            #expect(try migrator.pendingIdentifiers(db) == ["0010_create_posts"])
            #expect(try migrator.migrate(db) == ["0010_create_posts"])
            #expect(try migrator.migrate(db) == [])
            #expect(try migrator.appliedIdentifiers(db) == migrator.migrations.map(\.identifier))
            #expect(try db.queryValue("SELECT count(*) FROM users", as: Int.self) == 2)
            let applied = try db.query("SELECT identifier, checksum, applied_at FROM encryptedsqlite_migrations ORDER BY identifier")
            #expect(try applied[0].get("checksum", as: String?.self)?.hasPrefix("fnv1a64:") == true)
            #expect(try applied[2].get("checksum", as: String?.self) == nil)  // Swift code has none
            #expect(try applied[0].get("applied_at", as: Date.self) <= Date())
        }
    }

    @Test("an open call finds the key, rotates, then migrates on the same keyed connection")
    func openRotatesAndMigrates() throws {
        let directory = TemporaryDirectory("openmigrate")
        let ring = TestKeyring([.passphrase, .hex], in: directory)
        let path = directory.file("app.sqlite")
        let folder = MigrationsFolder.standard()
        let migrator = try standardMigrator(folder)
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 10)
        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), migrator: migrator)
        #expect(database.report.rotated)
        #expect(database.appliedMigrations.count == 4)
        #expect(try SQLCipherShell.run(path, key: ring.keys[1].shellKey, "SELECT count(*) FROM users; SELECT count(*) FROM people;").stdout == "2\n10\n")
        let again = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), migrator: migrator)
        #expect(again.appliedMigrations.isEmpty && !again.report.rotated)
    }

    @Test("the install script builds a fresh database in one step and marks what it covers as applied")
    func installScript() throws {
        let folder = MigrationsFolder.standard()
        var migrator = try standardMigrator(folder)
        migrator.installScript = InstallScript(sql: """
            CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT);
            CREATE INDEX users_email ON users(email);
            """, coversThrough: "0002_add_email")
        let scratch = try Scratch()
        try scratch.run { (db: Connection) throws in
            #expect(try migrator.migrate(db) == ["0001_create_users", "0002_add_email", "0003_seed", "0010_create_posts"])
            #expect(try migrator.appliedIdentifiers(db).count == 4)
            #expect(try db.queryValue("SELECT count(*) FROM users", as: Int.self) == 2)
        }
        // Not on a database that already has a schema.
        let used = try Scratch()
        try used.run { (db: Connection) throws in
            try db.execute("CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
            #expect(throws: MigrationError.self) { try migrator.migrate(db) }  // 0001 runs, and fails: users exists
            #expect(try migrator.appliedIdentifiers(db) == [])
        }
    }

    @Test("a failing migration leaves the previous migration's state and data; the error names the migration and statement")
    func failure() throws {
        let folder = MigrationsFolder.standard()
        folder.write("0011_broken.sql", "INSERT INTO users(name) VALUES ('carl');\nINSERT INTO nowhere VALUES (1);\n")
        let migrator = try standardMigrator(folder)
        let scratch = try Scratch()
        try scratch.run { (db: Connection) throws in
            do {
                try migrator.migrate(db)
                Issue.record("expected a failure")
            } catch {
                guard case let .migrationFailed(identifier, statement, reason) = error as? MigrationError else { Issue.record("\(error)"); return }
                #expect(identifier == "0011_broken")
                #expect(statement == "INSERT INTO nowhere VALUES (1);")
                #expect(reason.contains("no such table"))
            }
            #expect(try migrator.currentIdentifier(db) == "0010_create_posts")
            #expect(try db.queryValue("SELECT count(*) FROM users WHERE name = 'carl'", as: Int.self) == 0)
            #expect(try db.queryValue("SELECT count(*) FROM users", as: Int.self) == 2)
            #expect(!db.isInTransaction)
        }
    }

    @Test("an applied SQL migration edited since is refused, with nothing changed")
    func editedMigration() throws {
        let folder = MigrationsFolder.standard()
        let scratch = try Scratch()
        try scratch.run { db in _ = try standardMigrator(folder).migrate(db, upTo: "0003_seed") }
        folder.write("0002_add_email.sql", "ALTER TABLE users ADD COLUMN email TEXT; -- edited\n")
        let edited = try standardMigrator(folder)
        let snapshot = try scratch.run { try Fixture.contentDigest($0) }
        try scratch.run { (db: Connection) throws in
            #expect {
                try edited.migrate(db)
            } throws: { error in
                guard case .checksumMismatch("0002_add_email", let file?, _, _) = error as? MigrationError else { return false }
                return file.hasSuffix("0002_add_email.sql")
            }
            #expect(try Fixture.contentDigest(db) == snapshot)
        }
    }

    @Test("a database migrated by a newer app version (unknown applied migrations) is refused, with nothing changed")
    func unknownApplied() throws {
        let folder = MigrationsFolder.standard()
        let scratch = try Scratch()
        var newer = try standardMigrator(folder)
        try newer.registerMigration("0020_future") { db in try db.execute("CREATE TABLE future(a)") }
        try scratch.run { db in _ = try newer.migrate(db) }
        let older = try standardMigrator(folder)
        let snapshot = try scratch.run { try Fixture.contentDigest($0) }
        try scratch.run { (db: Connection) throws in
            #expect(throws: MigrationError.unknownAppliedMigrations(["0020_future"])) { try older.migrate(db) }
            #expect(throws: MigrationError.unknownAppliedMigrations(["0020_future"])) { try older.migrate(db, downTo: nil) }
            #expect(try Fixture.contentDigest(db) == snapshot)
        }
    }

    @Test("down migrations revert newest first to a target; an irreversible one blocks before anything changes")
    func down() throws {
        let folder = MigrationsFolder.standard()
        let migrator = try standardMigrator(folder)
        let scratch = try Scratch()
        try scratch.run { (db: Connection) throws in
            try migrator.migrate(db)
            #expect(try migrator.migrate(db, downTo: "0002_add_email") == ["0010_create_posts", "0003_seed"])
            #expect(try migrator.currentIdentifier(db) == "0002_add_email")
            #expect(try db.queryValue("SELECT count(*) FROM sqlite_master WHERE name = 'posts'", as: Int.self) == 0)
            #expect(try migrator.migrate(db, downTo: nil) == ["0002_add_email", "0001_create_users"])
            #expect(try migrator.appliedIdentifiers(db).isEmpty)
            #expect(try db.queryValue("SELECT count(*) FROM sqlite_master WHERE name = 'users'", as: Int.self) == 0)
        }
        var oneWay = try standardMigrator(folder)
        try oneWay.registerMigration("0004_one_way") { db in try db.execute("UPDATE users SET email = lower(email)") }
        let other = try Scratch()
        try other.run { (db: Connection) throws in
            try oneWay.migrate(db)
            #expect(throws: MigrationError.irreversible(identifier: "0004_one_way")) { try oneWay.migrate(db, downTo: "0001_create_users") }
            #expect(try oneWay.appliedIdentifiers(db).count == 5)
        }
    }

    @Test("a migration that leaves foreign-key violations is rolled back")
    func foreignKeys() throws {
        let folder = MigrationsFolder.standard()
        folder.write("0011_orphan.sql", "INSERT INTO posts(user, body) VALUES (999, 'orphan');\n")
        let migrator = try standardMigrator(folder)
        let scratch = try Scratch()
        try scratch.run { (db: Connection) throws in
            #expect {
                try migrator.migrate(db)
            } throws: { error in
                guard case .foreignKeyViolations("0011_orphan", let violations) = error as? MigrationError else { return false }
                return violations.first?.contains("posts") == true
            }
            #expect(try db.queryValue("SELECT count(*) FROM posts", as: Int.self) == 0)
            #expect(try migrator.currentIdentifier(db) == "0010_create_posts")
        }
    }

    @Test("with foreign keys on (the default), a migration that rebuilds a parent table keeps the rows that refer to it; enforcement is back on after")
    func tableRebuildWithForeignKeys() throws {
        var migrator = DatabaseMigrator()
        try migrator.registerSQLMigration("0001_library", sql: """
            CREATE TABLE authors(id INTEGER PRIMARY KEY, name TEXT);
            CREATE TABLE books(id INTEGER PRIMARY KEY, author INTEGER NOT NULL REFERENCES authors(id) ON DELETE CASCADE, title TEXT);
            INSERT INTO authors(id, name) VALUES (1, 'Ann'), (2, 'Bob');
            INSERT INTO books(author, title) VALUES (1, 'A'), (1, 'B'), (2, 'C');
            """)
        // SQLite's recipe for a change ALTER TABLE cannot make: create, copy, drop, rename.
        try migrator.registerSQLMigration("0002_authors_name_not_null", sql: """
            CREATE TABLE authors_new(id INTEGER PRIMARY KEY, name TEXT NOT NULL);
            INSERT INTO authors_new(id, name) SELECT id, name FROM authors;
            DROP TABLE authors;
            ALTER TABLE authors_new RENAME TO authors;
            """)
        let directory = TemporaryDirectory("migrations")
        let path = directory.file("library.sqlite")
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "k", source: .hex(TestKeys.hex()))])
        let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(createIfMissing: true), migrator: migrator)
        #expect(database.appliedMigrations == ["0001_library", "0002_authors_name_not_null"])
        try database.writeWithoutTransaction { db in
            #expect(try db.queryValue("SELECT count(*) FROM books", as: Int.self) == 3)
            #expect(try db.query("PRAGMA foreign_key_check").isEmpty)
            #expect(try db.queryValue("PRAGMA foreign_keys", as: Int.self) == 1)
            #expect(throws: SQLiteError.self) { try db.execute("INSERT INTO books(author, title) VALUES (99, 'orphan')") }
            try db.execute("DELETE FROM authors WHERE id = 2")
            #expect(try db.queryValue("SELECT count(*) FROM books", as: Int.self) == 2)
        }
    }

    @Test("registration mistakes: duplicate identifiers, badly named SQL files, empty up sections, unknown targets (naming the database)")
    func registration() throws {
        var migrator = DatabaseMigrator()
        try migrator.registerMigration("1_a") { _ in }
        #expect(throws: MigrationError.duplicateIdentifier("1_a")) { try migrator.registerMigration("1_a") { _ in } }
        #expect(throws: MigrationError.emptyIdentifier) { try migrator.registerMigration("") { _ in } }
        #expect(throws: MigrationError.emptyMigration(identifier: "2_b")) { try migrator.registerSQLMigration("2_b", sql: "-- down\nDROP TABLE x;") }
        let folder = MigrationsFolder()
        folder.write("create_users.sql", "CREATE TABLE users(a);")
        #expect(throws: MigrationError.invalidFileName(path: folder.directory.file("create_users.sql"))) { try migrator.registerSQLMigrations(in: folder.path) }
        #expect {
            try migrator.registerSQLMigrations(in: "/nonexistent/x")
        } throws: { error in
            if case .folderUnreadable("/nonexistent/x", _) = error as? MigrationError { true } else { false }
        }
        let scratch = try Scratch()
        let copy = migrator
        _ = try scratch.run { db in #expect(throws: MigrationError.unknownTarget("9_z", database: scratch.path)) { try copy.migrate(db, upTo: "9_z") } }
        _ = try scratch.run { db in #expect(throws: MigrationError.unknownTarget("9_y", database: scratch.path)) { try copy.migrate(db, downTo: "9_y") } }
        #expect(MigrationError.unknownTarget("9_z", database: scratch.path).description.hasPrefix("\(scratch.path): there is no migration \"9_z\""))
        var order = DatabaseMigrator()
        for id in ["10_c", "2_b", "0001_a", "2_a", "x_text"] { try order.registerMigration(id) { _ in } }
        #expect(order.migrations.map(\.identifier) == ["0001_a", "2_a", "2_b", "10_c", "x_text"])
    }

    @Test("SQL migration files: the -- down section splits, a file with no down is irreversible")
    func sqlSections() throws {
        var migrator = DatabaseMigrator()
        try migrator.registerSQLMigration("1_a", sql: "-- up\nCREATE TABLE a(x);\n  -- DOWN  \nDROP TABLE a;")
        try migrator.registerSQLMigration("2_b", sql: "CREATE TABLE b(x);")
        #expect(migrator.migrations.map(\.isReversible) == [true, false])
    }
}
