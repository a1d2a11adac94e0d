import DurableFiles
import SQLCipherConnection
@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Testing
import TestSupport

/// The names in a folder that are not key files, nor the step-aside lock files (`-lock`) every
/// database the library opened keeps beside it.
func databaseFiles(in directory: TemporaryDirectory) -> [String] {
    directory.listing().filter { !$0.hasSuffix(".key") && !$0.hasSuffix("-lock") }
}

@Suite("Plaintext to encrypted (export path)", .ownThread)
struct PlaintextEncryptionTests {
    @Test("a plaintext file made by the sqlite3 shell is encrypted to the current key, everything preserved, no side files",
          arguments: [false, true])
    func encryptsPlaintext(walMode: Bool) throws {
        let directory = TemporaryDirectory("plain")
        let ring = TestKeyring([.passphrase, .hex], in: directory, plaintextID: "v0")
        let path = directory.file("app.sqlite")
        try SQLiteShell.createFixture(at: path, rows: 300, walMode: walMode)
        let keys = try ring.keyList(database: path)
        let expected = try Fixture.digest(of: path, with: keys)
        #expect(DatabaseFileKind.inspect(path: path) == .plaintextSQLite(bytes: Int(FileSystem.size(of: path)!)))

        let database = try EncryptedDatabase(path: path, keys: keys)
        #expect(database.report.openedWithKeyID == "v0")
        #expect(database.report.rotation?.method == .export)
        #expect(database.report.rotation?.toKeyID == "k2")
        #expect(try database.read { try $0.journalMode() } == (walMode ? "wal" : "delete"))
        #expect(try database.read { try Fixture.contentDigest($0) } == expected)

        if case .opaque = DatabaseFileKind.inspect(path: path) {} else { Issue.record("the file is still plaintext") }
        #expect(try SQLCipherShell.opens(path, with: ring.keys[1].shellKey))
        #expect(try !SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
        let shell = try SQLCipherShell.run(path, key: ring.keys[1].shellKey, "PRAGMA user_version; PRAGMA application_id; SELECT count(*) FROM people; SELECT count(*) FROM sqlite_master;")
        #expect(shell.stdout == "42\n1234567\n300\n5\n")
        // The plain sqlite3 shell can no longer read it.
        #expect(try SQLiteShell.run(path, "SELECT count(*) FROM people;").status != 0)
        let sideFiles = databaseFiles(in: directory).filter { $0 != "app.sqlite" && !(walMode && ($0 == "app.sqlite-wal" || $0 == "app.sqlite-shm")) }
        #expect(sideFiles.isEmpty, "\(sideFiles)")

        // The next open tries one key and changes nothing.
        let again = try EncryptedDatabase(path: path, keys: keys)
        #expect(again.report.attempts.map(\.keyID) == ["k2"])
        #expect(!again.report.rotated)
    }

    @Test("without a plaintext entry a plaintext file is an error that says how to opt in, and stays byte-identical")
    func refusesWithoutOptIn() throws {
        let directory = TemporaryDirectory("plain")
        let ring = TestKeyring([.passphrase, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try SQLiteShell.createFixture(at: path, rows: 20)
        let snapshot = FileSnapshot(path)
        #expect(throws: EncryptedDatabaseError.plaintextDatabase(path: path)) {
            try EncryptedDatabase(path: path, keys: ring.keyList(database: path))
        }
        #expect(EncryptedDatabaseError.plaintextDatabase(path: path).description.contains("plaintext: true"))
        #expect(FileSnapshot(path) == snapshot)
    }

    @Test("a plaintext entry is allowed only first, and not alone")
    func plaintextEntryPlacement() throws {
        let hex = DatabaseKey(id: "k", source: .hex(TestKeys.hex()))
        #expect(throws: KeyConfigurationError.plaintextEntryMisplaced(keyID: "p", database: "db")) {
            try KeyList(database: "db", keys: [hex, .plaintext(id: "p")])
        }
        #expect(throws: KeyConfigurationError.plaintextEntryMisplaced(keyID: "p", database: "db")) {
            try KeyList(database: "db", keys: [.plaintext(id: "p")])
        }
        let keys = try KeyList(database: "db", keys: [.plaintext(id: "p"), hex])
        #expect(keys.ids == ["p", "k"])
        #expect(keys.plaintextKeyID == "p")
        #expect(keys.currentID == "k")
    }

    @Test("read-only opens and check() report a plaintext file as needing rotation, writing nothing")
    func checkPlaintext() throws {
        let directory = TemporaryDirectory("plain")
        let ring = TestKeyring([.hex], in: directory, plaintextID: "v0")
        let path = directory.file("app.sqlite")
        try SQLiteShell.createFixture(at: path, rows: 20)
        let snapshot = FileSnapshot(path)
        let check = try EncryptedDatabase.check(path: path, keys: ring.keyList(database: path))
        #expect(check.openedWithKeyID == "v0")
        #expect(check.needsRotation)
        #expect(throws: EncryptedDatabaseError.rotationNeeded(path: path, openedWith: "v0", currentKeyID: "k1")) {
            try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: OpenOptions(readOnly: true))
        }
        #expect(FileSnapshot(path) == snapshot)
    }

    @Test("a failure at each durable step before the swap leaves the original byte-identical and no temporary",
          arguments: ["fsync", "rename"])
    func failureBeforeSwap(step: String) throws {
        let directory = TemporaryDirectory("plain-fail")
        let ring = TestKeyring([.hex], in: directory, plaintextID: "v0")
        let path = directory.file("app.sqlite")
        try SQLiteShell.createFixture(at: path, rows: 50)
        let snapshot = FileSnapshot(path)
        let keys = try ring.keyList(database: path)
        var files = FileOperations.system
        let injected = FileSystemError.failed(operation: "injected \(step)", errno: EIO)
        switch step {
        case "fsync": files.fsync = { _ throws(FileSystemError) in throw injected }
        default: files.rename = { _, _ throws(FileSystemError) in throw injected }
        }
        let outcome = try KeyProbe(keys: keys, trial: KeyedConnections(path: path, access: .readWrite, busyTimeout: .seconds(1))).run()
        let context = RotationContext(path: path, from: outcome.key, to: keys.current, busyTimeout: .seconds(1), verification: .quickCheck,
                                      logger: OpenOptions().logger, files: files, workers: 1)
        #expect(throws: EncryptedDatabaseError.self) {
            _ = try ExportRotation().rotate(outcome.connection, in: context)
        }
        #expect(FileSnapshot(path) == snapshot)
        #expect(DatabaseFileKind.inspect(path: path) == .plaintextSQLite(bytes: snapshot.bytes!.count))
    }

    @Test("a stale export temporary is removed by the next open; one a live process holds is kept")
    func staleTemporaries() throws {
        let directory = TemporaryDirectory("plain-stale")
        let ring = TestKeyring([.hex], in: directory, plaintextID: "v0")
        let path = directory.file("app.sqlite")
        try SQLiteShell.createFixture(at: path, rows: 20)
        let stale = directory.file(".app.sqlite.0badc0de.rekey-export")
        _ = FileManager.default.createFile(atPath: stale, contents: Data(repeating: 7, count: 4096))
        _ = FileManager.default.createFile(atPath: stale + "-journal", contents: Data(repeating: 7, count: 512))
        let held = directory.file(".app.sqlite.12345678.rekey-export")
        let holder = try LockedNewFile(path: held, mode: 0o600, ownerOf: nil)
        let unrelated = directory.file(".app.sqlite.not-ours.rekey-export")
        _ = FileManager.default.createFile(atPath: unrelated, contents: Data())

        _ = try EncryptedDatabase(path: path, keys: ring.keyList(database: path))
        #expect(!FileManager.default.fileExists(atPath: stale))
        #expect(!FileManager.default.fileExists(atPath: stale + "-journal"))
        #expect(FileManager.default.fileExists(atPath: held))
        #expect(FileManager.default.fileExists(atPath: unrelated))
        holder.unlock()
        #expect(try SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
    }

    @Test("a WAL-mode plaintext file that another connection (not of this library) has open is reported busy and left as it was")
    func walBusy() throws {
        let directory = TemporaryDirectory("plain-wal")
        let ring = TestKeyring([.hex], in: directory, plaintextID: "v0")
        let path = directory.file("app.sqlite")
        try SQLiteShell.createFixture(at: path, rows: 20, walMode: true)
        let keys = try ring.keyList(database: path)
        // A library database would step aside (StepAsideTests); a plain connection cannot.
        let other = try Connection(path: path, access: .readWrite, key: nil, busyTimeout: .seconds(5))
        defer { other.close() }
        #expect(try other.queryValue("SELECT count(*) FROM people", as: Int.self) == 20)
        do {
            _ = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(busyTimeout: .milliseconds(200)))
            Issue.record("rotated while another connection had the WAL file open")
        } catch {
            #expect(error.category == .busy, "\(error)")
        }
        #expect(DatabaseFileKind.inspect(path: path) == .plaintextSQLite(bytes: Int(FileSystem.size(of: path)!)))
        #expect(try other.queryValue("SELECT count(*) FROM people", as: Int.self) == 20)
        #expect(!databaseFiles(in: directory).contains { $0.hasSuffix(".rekey-export") })
    }
}
