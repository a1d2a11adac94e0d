import DurableFiles
@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Testing
import TestSupport

/// Values that are easy to get wrong in a dump: quotes, newlines, non-ASCII, NULL, reals that
/// need exact round trips, large integers, empty and binary blobs, a WITHOUT ROWID table and an
/// AUTOINCREMENT table (sqlite_sequence).
let trickySQL = #"""
    CREATE TABLE tricky(id INTEGER PRIMARY KEY AUTOINCREMENT, t TEXT, r REAL, b BLOB, i INTEGER);
    INSERT INTO tricky(t, r, b, i) VALUES ('it''s "quoted"', 0.1, X'', 9223372036854775807);
    INSERT INTO tricky(t, r, b, i) VALUES ('line one
    line two', 1e300, X'00FF10', -9223372036854775808);
    INSERT INTO tricky(t, r, b, i) VALUES ('ünïcödé ✓ 日本', -2.5e-300, NULL, NULL);
    INSERT INTO tricky(t, r, b, i) VALUES (NULL, 3.0, randomblob(64), 0);
    DELETE FROM tricky WHERE id = 4;
    CREATE TABLE pairs(k TEXT PRIMARY KEY, v) WITHOUT ROWID;
    INSERT INTO pairs VALUES ('b', 2), ('a', 1.5), ('c', 'three');
    CREATE TABLE "odd ""name"""(x);
    INSERT INTO "odd ""name""" VALUES ('x');
    """#

@Suite("Inspection: dump, decrypted copy, state", .ownThread)
struct InspectionTests {
    @Test("a dump re-imported into a fresh encrypted database (library) and a plaintext one (sqlite3 shell) gives identical content")
    func dumpRoundTrip() throws {
        let directory = TemporaryDirectory("dump")
        let ring = TestKeyring([.passphrase, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[1].shellKey, rows: 150)
        #expect(try SQLCipherShell.run(path, key: ring.keys[1].shellKey, trickySQL).status == 0)
        let keys = try ring.keyList(database: path)
        let expected = try Fixture.digest(of: path, with: keys)
        let snapshot = FileSnapshot(path)  // after the digest's open, which creates the lock file

        var lines: [String] = []
        try DatabaseInspection.dump(path: path, keys: keys) { lines.append($0) }
        let dump = lines.joined(separator: "\n") + "\n"
        #expect(FileSnapshot(path) == snapshot)
        #expect(dump.hasPrefix("PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\nCREATE TABLE people"))
        #expect(dump.hasSuffix("PRAGMA user_version=42;\nPRAGMA application_id=1234567;\nCOMMIT;\n"))
        #expect(dump.contains("INSERT INTO \"sqlite_sequence\" VALUES('tricky',4);"))

        let imported = directory.file("imported.sqlite")
        let fresh = try KeyList(database: imported, keys: [DatabaseKey(id: "fresh", source: .hex(TestKeys.hex()))])
        let database = try EncryptedDatabase(path: imported, keys: fresh, options: OpenOptions(createIfMissing: true))
        try database.writeWithoutTransaction { try $0.execute(dump) }
        #expect(try database.read { try Fixture.contentDigest($0) } == expected)

        let plain = directory.file("plain.sqlite")
        let shell = try SQLiteShell.run(plain, dump)
        #expect(shell.status == 0, "\(shell.stderr)")
        let plainKeys = try KeyList(database: plain, keys: [.plaintext(id: "p"), DatabaseKey(id: "x", source: .hex(TestKeys.hex()))])
        #expect(try Fixture.digest(of: plain, with: plainKeys) == expected)
    }

    @Test("a decrypted copy is a verified plaintext file the sqlite3 shell reads; the source is untouched; an existing target is never overwritten")
    func decryptedCopy() throws {
        let directory = TemporaryDirectory("decrypt")
        let ring = TestKeyring([.passphrase, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 90)
        let keys = try ring.keyList(database: path)
        let snapshot = FileSnapshot(path)
        let expected = try Fixture.digest(of: path, with: ring.only(0, database: path))
        let target = directory.file("copy.sqlite")
        try DatabaseInspection.decryptedCopy(path: path, keys: keys, to: target)
        #expect(FileSnapshot(path).bytes == snapshot.bytes)
        #expect(DatabaseFileKind.inspect(path: target) == .plaintextSQLite(bytes: Int(FileSystem.size(of: target)!)))
        let shell = try SQLiteShell.run(target, "PRAGMA integrity_check; PRAGMA user_version; PRAGMA application_id; SELECT count(*) FROM people;")
        #expect(shell.stdout == "ok\n42\n1234567\n90\n")
        let plainKeys = try KeyList(database: target, keys: [.plaintext(id: "p"), DatabaseKey(id: "x", source: .hex(TestKeys.hex()))])
        #expect(try Fixture.digest(of: target, with: plainKeys) == expected)
        #expect(databaseFiles(in: directory).sorted() == ["app.sqlite", "copy.sqlite"])

        let existing = FileSnapshot(target)
        #expect(throws: EncryptedDatabaseError.targetExists(path: target)) {
            try DatabaseInspection.decryptedCopy(path: path, keys: keys, to: target)
        }
        #expect(FileSnapshot(target) == existing)
    }

    @Test("state reports the key, settings and sizes of encrypted and plaintext files without changing them")
    func state() throws {
        let directory = TemporaryDirectory("state")
        let ring = TestKeyring([.passphrase, .hex], in: directory, plaintextID: "v0")
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 40)
        let keys = try ring.keyList(database: path)
        let snapshot = FileSnapshot(path)
        let state = try DatabaseInspection.state(path: path, keys: keys)
        #expect(FileSnapshot(path) == snapshot)
        #expect(state.openedWithKeyID == "k1" && state.currentKeyID == "k2" && state.needsRotation && state.rotationMethod == .pageReencryption)
        // The shell wrote the file in its engine's default format: SQLCipher 3's or SQLCipher 4's.
        if SQLCipherEngine.linked.major >= 4 {
            #expect(state.pageSize == 4096 && state.kdfIterations == 256_000 && state.useHMAC == true && !state.plaintext)
            #expect(state.format == "kdf_iter 256000 (sha512), page_size 4096, hmac sha512")
        } else {
            #expect(state.pageSize == 1024 && state.kdfIterations == 64000 && state.useHMAC == true && !state.plaintext)
            #expect(state.format == "kdf_iter 64000 (sha1), page_size 1024, hmac sha1")
        }
        #expect(state.pageCount * state.pageSize == Int(state.bytes))
        #expect(state.journalMode == "delete" && state.userVersion == 42 && state.sideFiles.isEmpty)

        let plain = directory.file("plain.sqlite")
        try SQLiteShell.createFixture(at: plain, rows: 10)
        let plainState = try DatabaseInspection.state(path: plain, keys: ring.keyList(database: plain))
        #expect(plainState.plaintext && plainState.openedWithKeyID == "v0" && plainState.rotationMethod == .export && plainState.kdfIterations == nil)
    }
}
