import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// A bad input for `EncryptedDatabase`: how to make it, and the error it must give.
struct BadInput: CustomTestStringConvertible, Sendable {
    let name: String
    /// Prepares the path (or not) in the folder.
    let make: @Sendable (_ path: String, _ directory: TemporaryDirectory) throws -> Void
    let expected: @Sendable (_ path: String) -> EncryptedDatabaseError
    var testDescription: String { name }
}

let badInputs: [BadInput] = [
    BadInput(name: "missing file", make: { _, _ in }, expected: { .fileNotFound(path: $0) }),
    BadInput(name: "directory", make: { path, _ in try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false) },
             expected: { .notARegularFile(path: $0, kind: "directory") }),
    BadInput(name: "empty file", make: { path, _ in _ = FileManager.default.createFile(atPath: path, contents: Data()) },
             expected: { .emptyFile(path: $0) }),
    BadInput(name: "truncated file (100 random bytes)", make: { path, _ in
        _ = FileManager.default.createFile(atPath: path, contents: Data((0..<100).map { _ in UInt8.random(in: 0...255) }))
    }, expected: { .fileTooShort(path: $0, bytes: 100) }),
    BadInput(name: "plaintext SQLite made by the sqlite3 shell", make: { path, _ in
        let result = try ProcessRunner.run("/usr/bin/sqlite3", [path], input: "CREATE TABLE t(a); INSERT INTO t VALUES (1);")
        guard result.status == 0 else { throw FixtureError(message: result.stderr) }
    }, expected: { .plaintextDatabase(path: $0) }),
    BadInput(name: "random bytes (8 KiB)", make: { path, _ in
        _ = FileManager.default.createFile(atPath: path, contents: Data((0..<8192).map { _ in UInt8.random(in: 0...255) }))
    }, expected: { .noKeyOpens(path: $0, triedKeyIDs: ["k3", "k2", "k1"]) }),
    BadInput(name: "encrypted with a key not in the list", make: { path, _ in
        try Fixture.createWithShell(at: path, key: .passphrase(TestKeys.passphrase("stranger")), rows: 5)
    }, expected: { .noKeyOpens(path: $0, triedKeyIDs: ["k3", "k2", "k1"]) }),
    BadInput(name: "truncated encrypted database (first page only)", make: { path, directory in
        let full = directory.file("full.sqlite")
        try Fixture.createWithShell(at: full, key: .passphrase(TestKeys.passphrase("stranger")), rows: 50)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: full)).prefix(1024)
        try FileManager.default.removeItem(atPath: full)
        _ = FileManager.default.createFile(atPath: path, contents: bytes)
    }, expected: { .noKeyOpens(path: $0, triedKeyIDs: ["k3", "k2", "k1"]) }),
]

@Suite("Opening: bad inputs change nothing", .ownThread)
struct OpeningTests {
    @Test("each bad input gives its own error, leaves the file byte-identical and creates no side files", arguments: badInputs)
    func badInput(_ input: BadInput) throws {
        let directory = TemporaryDirectory("bad")
        let ring = TestKeyring([.passphrase, .hex, .envPassphrase], in: directory)
        let path = directory.file("app.sqlite")
        try input.make(path, directory)
        let snapshot = FileSnapshot(path)
        let keys = try ring.keyList(database: path)
        for options in [OpenOptions(), OpenOptions(readOnly: true)] {
            do {
                _ = try EncryptedDatabase(path: path, keys: keys, options: options)
                Issue.record("\(input.name) opened")
            } catch {
                #expect(error == input.expected(path))
                #expect(error.description.contains(path))
                for key in ring.keys { #expect(!error.description.contains(key.secret)) }
                // Only an engine that cannot read SQLCipher 4's format mentions it.
                if case .noKeyOpens = error { #expect(error.description.contains("SQLCipher 4") == (SQLCipherEngine.linked.major < 4)) }
            }
            #expect(FileSnapshot(path) == snapshot, "the file or its folder changed")
        }
        #expect(throws: input.expected(path)) { try EncryptedDatabase.check(path: path, keys: keys) }
        #expect(FileSnapshot(path) == snapshot)
    }

    @Test("a file locked by another connection is reported as busy, unchanged")
    func busy() throws {
        let directory = TemporaryDirectory("busy")
        let ring = TestKeyring([.hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 5)
        let holder = try EncryptedDatabase(path: path, keys: ring.keyList(database: path))
        try holder.writeWithoutTransaction { db in
            try db.execute("BEGIN EXCLUSIVE")
            try db.execute("INSERT INTO audit(note) VALUES ('held')")
        }
        let snapshot = FileSnapshot(path)
        #expect {
            _ = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: OpenOptions(busyTimeout: .milliseconds(100)))
        } throws: { error in
            guard let error = error as? EncryptedDatabaseError, case .busy(path, _) = error else { return false }
            return error.category == .busy
        }
        #expect(FileSnapshot(path) == snapshot)
        try holder.writeWithoutTransaction { try $0.execute("ROLLBACK") }
    }

    @Test("createIfMissing makes an encrypted file with the current key, with no 0-byte or temporary file left")
    func create() throws {
        let directory = TemporaryDirectory("create")
        let ring = TestKeyring([.passphrase, .hex], in: directory)
        let path = directory.file("new.sqlite")
        let before = directory.listing()
        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: OpenOptions(createIfMissing: true))
        #expect(database.report.created && database.report.openedWithKeyID == "k2" && !database.report.rotated)
        // The database and the step-aside lock file every opened database keeps beside it.
        #expect(directory.listing() == (before + ["new.sqlite", "new.sqlite-lock"]).sorted())
        #expect(DatabaseFileKind.inspect(path: path) == .opaque(bytes: Int(TestFiles.contents(path)?.count ?? 0)))
        try database.write { db in try db.execute("CREATE TABLE t(a); INSERT INTO t VALUES ('x')") }
        #expect(try SQLCipherShell.run(path, key: ring.keys[1].shellKey, "SELECT a FROM t;").stdout == "x\n")
        #expect(try !SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
        let reopened = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: OpenOptions(createIfMissing: true))
        #expect(!reopened.report.created)
    }

    @Test("createIfMissing does not create a database in a folder that does not exist, nor when read-only")
    func createRefusals() throws {
        let directory = TemporaryDirectory("create")
        let ring = TestKeyring([.hex], in: directory)
        let nested = directory.file("absent/new.sqlite")
        #expect(throws: EncryptedDatabaseError.fileNotFound(path: nested)) {
            _ = try EncryptedDatabase(path: nested, keys: ring.keyList(database: nested), options: OpenOptions(createIfMissing: true))
        }
        let path = directory.file("new.sqlite")
        #expect(throws: EncryptedDatabaseError.fileNotFound(path: path)) {
            _ = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: OpenOptions(createIfMissing: true, readOnly: true))
        }
        #expect(directory.listing().allSatisfy { $0.hasSuffix(".key") })
    }

    @Test("DatabaseFileKind tells the kinds of file apart from their first bytes")
    func fileKinds() throws {
        let directory = TemporaryDirectory("kinds")
        let path = directory.file("x")
        #expect(DatabaseFileKind.inspect(path: path) == .missing)
        #expect(DatabaseFileKind.inspect(path: directory.path) == .notARegularFile(kind: "directory"))
        _ = FileManager.default.createFile(atPath: path, contents: Data("SQLite format 3\0".utf8) + Data(count: 1008))
        #expect(DatabaseFileKind.inspect(path: path) == .plaintextSQLite(bytes: 1024))
        _ = FileManager.default.createFile(atPath: path, contents: Data(count: 511))
        #expect(DatabaseFileKind.inspect(path: path) == .tooShort(bytes: 511))
    }
}
