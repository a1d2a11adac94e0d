@testable import DatabaseMigrations
import Foundation
import SQLCipherConnection
import Testing
import TestSupport

/// Every defect the fuzz tests found, with its minimized input.
@Suite("Fuzz regressions")
struct FuzzRegressionTests {
    @Test("a migration file with CRLF line endings splits at its -- down line (before: one line, the down SQL ran as part of up)")
    func crlfDownMarker() throws {
        // Minimized by the round-trip property: an empty up and down around the marker, CRLF.
        #expect(SQLMigrationFile.sections(of: "\r\n--down\r\n") == ("", nil))
        #expect(SQLMigrationFile.sections(of: "CREATE TABLE t(a);\r\n-- down\r\nDROP TABLE t;\r\n") == ("CREATE TABLE t(a);", "DROP TABLE t;"))
        #expect(SQLMigrationFile.sections(of: "A;\r-- DOWN\rB;") == ("A;", "B;"))

        // End to end: the up step must not run the down SQL.
        let scratch = try Scratch()
        var migrator = DatabaseMigrator()
        try migrator.registerSQLMigration("0001_users", sql: "CREATE TABLE users(id INTEGER PRIMARY KEY);\r\n-- down\r\nDROP TABLE users;\r\n")
        try scratch.run { db in
            _ = try migrator.migrate(db)
            #expect(try db.queryValue("SELECT count(*) FROM sqlite_master WHERE name = 'users'", as: Int.self) == 1, "the up step dropped its own table")
            _ = try migrator.migrate(db, downTo: nil)
            #expect(try db.queryValue("SELECT count(*) FROM sqlite_master WHERE name = 'users'", as: Int.self) == 0)
        }
    }

    @Test("migration versions are ASCII digits, and a name may start with any character (before: 8_\u{301}.sql was refused, ½_x.sql was a version)")
    func fileNames() {
        // Minimized by the file-name property: version "8", name "\u{301}" (a combining mark, which
        // joined the underscore into one Character).
        #expect(SQLMigrationFile.identifier(forFileName: "8_\u{301}.sql") == "8_\u{301}")
        #expect(SQLMigrationFile.identifier(forFileName: "0001_create_users.sql") == "0001_create_users")
        #expect(SQLMigrationFile.identifier(forFileName: "½_x.sql") == nil)
        #expect(SQLMigrationFile.identifier(forFileName: "١٢_x.sql") == nil)
        #expect(MigrationOrder.precedes("2_x", "10_x"))
        #expect(!MigrationOrder.precedes("½_x", "1_x"))
    }
}
