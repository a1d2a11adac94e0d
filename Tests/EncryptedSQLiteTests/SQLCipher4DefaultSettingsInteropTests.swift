import EncryptedSQLite
import Foundation
import Testing
import TestSupport

extension SQLCipher4InteropTests {
    @Test("the independent SQLCipher 4 is the one scripts/sqlcipher4-requirements.txt pins: SQLCipher 4.12")
    func independentSQLCipher4Version() throws {
        #expect(try SQLCipher4.version().hasPrefix("4.12."))
    }

    @Test("files this library writes open with default settings in the linked engine's own sqlcipher shell and, on SQLCipher 4, in SQLCipher 4.12, whose writes read back here",
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
        let checks = ["PRAGMA integrity_check", "SELECT count(*) FROM people", "PRAGMA user_version", "PRAGMA application_id"]

        // The engine's own shell, with nothing but the key: the format that engine writes by default.
        let shell = try SQLCipherShell.run(path, key: current, checks.map { $0 + ";" }.joined(separator: "\n"))
        #expect(shell.status == 0, "sqlcipher \(SQLCipherShell.majorVersion).x: \(shell.stderr)")
        #expect(shell.stdout.split(separator: "\n") == ["ok", "60", "42", "1234567"])

        // On 3.4.1 the library writes 3.x files, which SQLCipher 4.12 reads in compatibility mode
        // (ourFilesOpenInSQLCipher4); on SQLCipher 4, its own format, which 4.12 reads with defaults.
        guard SQLCipherEngine.linked.major >= 4 else { return }
        let results = try SQLCipher4.execute(path, key: current, compatibility3: false,
                                             checks + ["INSERT INTO audit(person, note) VALUES (1, 'written by SQLCipher 4.12')"])
        #expect(results.prefix(4).map { $0.first?.first } == ["ok", "60", "42", "1234567"])
        let reopened = try EncryptedDatabase(path: path, keys: keys)
        #expect(!reopened.report.rotated)
        #expect(try reopened.read { try $0.queryValue("SELECT count(*) FROM audit WHERE note = 'written by SQLCipher 4.12'", as: Int.self) } == 1)
        #expect(try reopened.read { try $0.queryValue("PRAGMA integrity_check", as: String.self) } == "ok")
    }
}
