import EncryptedSQLite
import Foundation
import Testing
import TestSupport

extension SQLCipher4InteropTests {
    @Test("the independent SQLCipher 4 is the one scripts/sqlcipher4-requirements.txt pins: SQLCipher 4.12")
    func independentSQLCipher4Version() throws {
        #expect(try SQLCipher4.version().hasPrefix("4.12."))
    }

    @Test("files this library writes open with nothing but the key in the linked engine's own sqlcipher shell (SQLCipher 4.12 with its defaults: ourFilesOpenInSQLCipher4)",
          arguments: ["created", "created with a raw key", "rotated in place", "encrypted from plaintext"])
    func ourFilesOpenWithDefaultSettings(how: String) throws {
        let directory = TemporaryDirectory("v4-defaults")
        let ring = TestKeyring(how == "created with a raw key" ? [.passphrase, .hex] : [.hex, .passphrase], in: directory,
                               plaintextID: how == "encrypted from plaintext" ? "v0" : nil)
        let path = directory.file("app.sqlite")
        switch how {
        case "rotated in place": try Fixture.createWithLibrary(at: path, keys: ring.only(0, database: path), rows: 60)
        case "encrypted from plaintext": try SQLiteShell.createFixture(at: path, rows: 60)
        default: try Fixture.createWithLibrary(at: path, keys: ring.only(1, database: path), rows: 60)
        }
        let keys = try ring.keyList(database: path)
        do {
            let database = try EncryptedDatabase(path: path, keys: keys)
            #expect(database.report.isOnCurrentKey)
            #expect(database.report.rotated == (how == "rotated in place" || how == "encrypted from plaintext"))
        }
        let current = ring.keys[1].shellKey
        // The engine's own shell, with nothing but the key: the format that engine writes by default.
        let shell = try SQLCipherShell.run(path, key: current, "PRAGMA integrity_check;\nSELECT count(*) FROM people;\nPRAGMA user_version;\nPRAGMA application_id;")
        #expect(shell.status == 0, "sqlcipher \(SQLCipherShell.majorVersion).x: \(shell.stderr)")
        #expect(shell.stdout.split(separator: "\n") == ["ok", "60", "42", "1234567"])
    }
}
