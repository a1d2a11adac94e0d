@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Testing
import TestSupport

let sqlcipher4Skip = Comment(rawValue: "SQLCipher 4 (PyPI sqlcipher3-binary) could not be installed and SQLCIPHER4_INTEROP_OPTIONAL=1: \(SQLCipher4.unavailableReason ?? "")")

@Suite("SQLCipher 4 interop (independent SQLCipher 4.12 via Python)", .enabled(if: SQLCipher4.interopTestsRun, sqlcipher4Skip))
struct SQLCipher4InteropTests {
    @Test("files this library writes (created, rotated in place, encrypted from plaintext) open in SQLCipher 4.12 (with cipher_compatibility = 3 for the 3.x files SQLCipher 3 writes, with its defaults for the 4.x files SQLCipher 4 writes), and what SQLCipher 4.12 writes there reads back here",
          arguments: ["created", "rotated in place", "encrypted from plaintext"])
    func ourFilesOpenInSQLCipher4(how: String) throws {
        let directory = TemporaryDirectory("v4-interop")
        let ring = TestKeyring([.passphrase, .hex], in: directory, plaintextID: how == "encrypted from plaintext" ? "v0" : nil)
        let path = directory.file("app.sqlite")
        switch how {
        case "created": try Fixture.createWithLibrary(at: path, keys: ring.only(1, database: path), rows: 60)
        case "rotated in place": try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 60)
        default: try SQLiteShell.createFixture(at: path, rows: 60)
        }
        let keys = try ring.keyList(database: path)
        let database = try EncryptedDatabase(path: path, keys: keys)
        #expect(database.report.isOnCurrentKey)
        let expected = try database.read { try Fixture.contentDigest($0) }
        let pages = try database.read { try $0.queryValue("PRAGMA page_count", as: Int.self) }

        // The linked engine's own format: 3.x on SQLCipher 3, 4.x on SQLCipher 4.
        let written3x = SQLCipherEngine.linked.major < 4
        let results = try SQLCipher4.execute(path, key: ring.keys[1].shellKey, compatibility3: written3x, [
            "PRAGMA integrity_check", "SELECT count(*) FROM people", "PRAGMA user_version", "PRAGMA application_id",
            "INSERT INTO audit(person, note) VALUES (1, 'written by SQLCipher 4')",
        ])
        #expect(results.prefix(4).map { $0.first?.first } == ["ok", "60", "42", "1234567"])
        // In the other generation's settings SQLCipher 4 cannot read it.
        #expect(throws: SQLCipher4Error.self) {
            try SQLCipher4.execute(path, key: ring.keys[1].shellKey, compatibility3: !written3x, ["SELECT count(*) FROM sqlite_master"])
        }
        let reopened = try EncryptedDatabase(path: path, keys: keys)
        #expect(try reopened.read { try $0.queryValue("SELECT count(*) FROM audit WHERE note = 'written by SQLCipher 4'", as: Int.self) } == 1)
        #expect(try reopened.read { try $0.queryValue("PRAGMA quick_check", as: String.self) } == "ok")
        #expect(try reopened.read { try $0.queryValue("SELECT count(*) FROM people", as: Int.self) } == 60)
        #expect(try reopened.read { try $0.queryValue("PRAGMA page_count", as: Int.self) } ?? 0 >= pages ?? 0)
        #expect(!expected.isEmpty)
    }

    @Test("a file written with SQLCipher 4 defaults: SQLCipher 3 names the key that is right for it and how to convert it; SQLCipher 4 opens and rotates it, and names the key whose settings name another format",
          arguments: [SourceKind.passphrase, .hex])
    func sqlcipher4FileDiagnosed(kind: SourceKind) throws {
        let directory = TemporaryDirectory("v4-file")
        let ring = TestKeyring([.passphrase, kind, .hex], in: directory)
        let path = directory.file("app.sqlite")
        _ = try SQLCipher4.execute(path, key: ring.keys[1].shellKey, compatibility3: false, [
            "CREATE TABLE t(a)", "INSERT INTO t VALUES (1)", "PRAGMA user_version = 5",
        ])
        let snapshot = FileSnapshot(path)
        let keys = try ring.keyList(database: path)
        if SQLCipherEngine.linked.major >= 4 {
            // The right key, pinned to another format: the error says so and changes nothing.
            let pinned = try KeyList(database: path, keys: [
                DatabaseKey(id: "k2", source: ring.keys[1].key.source, cipher: CipherSettings(generation: .sqlcipher3)), ring.keys[2].key,
            ])
            #expect(throws: EncryptedDatabaseError.sqlcipher4File(path: path, keyID: "k2", triedKeyIDs: ["k3", "k2"])) {
                try EncryptedDatabase(path: path, keys: pinned)
            }
            #expect(EncryptedDatabaseError.sqlcipher4File(path: path, keyID: "k2", triedKeyIDs: ["k3", "k2"]).description.contains("the key's cipher settings name another format"))
            #expect(FileSnapshot(path) == snapshot)
            // Without settings the key opens it, and the file is rotated with user_version kept.
            let database = try EncryptedDatabase(path: path, keys: keys)
            #expect(database.report.openedWithKeyID == "k2" && database.report.rotated)
            #expect(try database.read { try $0.userVersion() } == 5)
            let results = try SQLCipher4.execute(path, key: ring.keys[2].shellKey, compatibility3: false, ["SELECT count(*) FROM t", "PRAGMA user_version"])
            #expect(results.map { $0.first?.first } == ["1", "5"])
            return
        }
        do {
            _ = try EncryptedDatabase(path: path, keys: keys)
            Issue.record("the linked engine opened a SQLCipher 4 file")
        } catch {
            #expect(error == .sqlcipher4File(path: path, keyID: "k2", triedKeyIDs: ["k3", "k2", "k1"]))
            #expect(error.description.contains("key \"k2\" is correct but this is a SQLCipher 4 file"))
            #expect(error.description.contains("cipher: sqlcipher3") && error.description.contains("keeping user_version"))
            #expect(!error.description.contains("sqlcipher_export"))
            #expect(error.category == .unreadableContent)
            for key in ring.keys { #expect(!error.description.contains(key.secret)) }
        }
        #expect(FileSnapshot(path) == snapshot)

        // Without the right key: the plain "no key opens" error, which still names the SQLCipher 4 possibility.
        let strangers = try TestKeyring([.passphrase, .hex], in: directory, idPrefix: "s").keyList(database: path)
        #expect(throws: EncryptedDatabaseError.noKeyOpens(path: path, triedKeyIDs: ["s2", "s1"])) {
            try EncryptedDatabase(path: path, keys: strangers)
        }
        #expect(EncryptedDatabaseError.noKeyOpens(path: path, triedKeyIDs: ["s2", "s1"]).description.contains("SQLCipher 4"))
        #expect(FileSnapshot(path) == snapshot)
    }
}
