import EncryptedSQLite

/// Migrations with a checkable state after each one (used by crash-harness and checked by the crash tests in EndToEndTests).
public enum HarnessMigrations {
    /// The migrator; `rows` is the size of the long second migration.
    public static func migrator(rows: Int) throws -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        try migrator.registerSQLMigration("0001_accounts", sql: """
            CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL);
            WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 1000)
            INSERT INTO accounts(balance) SELECT 100 FROM n;
            """)
        try migrator.registerMigration("0002_ledger") { db in
            try db.execute("CREATE TABLE ledger(id INTEGER PRIMARY KEY, account INTEGER NOT NULL REFERENCES accounts(id), memo BLOB)")
            let insert = try db.prepare("INSERT INTO ledger(account, memo) VALUES (?, randomblob(200))")
            for index in 0..<rows { try insert.execute([index % 1000 + 1]) }
            try db.execute("UPDATE accounts SET balance = balance - 1")
        }
        try migrator.registerSQLMigration("0003_index", sql: """
            CREATE INDEX ledger_account ON ledger(account);
            UPDATE accounts SET balance = balance + 2;
            """)
        return migrator
    }
}

