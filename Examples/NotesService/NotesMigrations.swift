import EncryptedSQLite

/// The service's schema, one migration per change; each runs once, in its own transaction.
enum NotesMigrations {
    static func migrator() throws -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        try migrator.registerSQLMigration("0001_notes", sql: """
            CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT NOT NULL);
            """)
        try migrator.registerMigration("0002_author") { db in
            try db.execute("ALTER TABLE notes ADD COLUMN author TEXT NOT NULL DEFAULT ''")
            try db.execute("CREATE INDEX notes_by_author ON notes(author)")
        }
        return migrator
    }
}
