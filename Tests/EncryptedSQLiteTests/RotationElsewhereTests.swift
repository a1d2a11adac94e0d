import DurableFiles
@testable import EncryptedSQLite
import Foundation
import Logging
import Testing
import TestSupport

/// An open database meets its file rotated by another database object (its own connections, as
/// another process would have): it follows the rotation from its Keys file or key provider, retries
/// only what no caller code ran for, and says plainly when it cannot obtain the key.
/// The multi-process proof is `LiveRotationTests` (EndToEndTests).
@Suite("Following a rotation made elsewhere")
struct RotationElsewhereTests {
    /// A WAL database on `key-0` with a table, and a Keys file listing `key-0`.
    struct Setup {
        let directory = TemporaryDirectory("elsewhere")
        var hexKeys = [TestKeys.hex()]
        var path: String { directory.file("app.sqlite") }
        var keysFile: String { directory.file("Keys") }

        init() throws {
            try writeKeys()
            let database = try EncryptedDatabase(path: path, keysFile: keysFile, options: OpenOptions(createIfMissing: true))
            try database.writeWithoutTransaction { db in
                _ = try db.queryValue("PRAGMA journal_mode = WAL", as: String.self)
                try db.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT)")
            }
        }

        /// Lists `hexKeys` (and `extra` YAML lines for one more key) in the Keys file.
        func writeKeys(extra: String = "") throws {
            let entries = hexKeys.enumerated().map { "      - id: key-\($0.offset)\n        hex: \($0.element)" }.joined(separator: "\n")
            try ("databases:\n  - path: app.sqlite\n    keys:\n" + entries + "\n" + extra).write(toFile: keysFile, atomically: true, encoding: .utf8)
            chmod(keysFile, 0o600)  // it holds hex keys: the trust rules refuse it readable by others
        }

        /// Appends a key to the Keys file and rotates the file to it through a second database
        /// object, as another process would.
        mutating func rotateElsewhere() throws {
            hexKeys.append(TestKeys.hex())
            try writeKeys()
            let other = try EncryptedDatabase(path: path, keysFile: keysFile)
            #expect(other.report.rotated)
        }
    }

    @Test("a database opened from its Keys file follows a rotation made elsewhere: writer and pooled readers, each closure run once", arguments: [0, 3])
    func followsFromKeysFile(readers: Int) throws {
        var setup = try Setup()
        let capture = LogCapture()
        let database = try EncryptedDatabase(path: setup.path, keysFile: setup.keysFile, options: OpenOptions(concurrentReaders: readers, logger: capture.logger))
        try database.write { db in try db.execute("INSERT INTO notes(text) VALUES ('before')") }
        _ = try database.read { db in try db.queryValue("SELECT count(*) FROM notes", as: Int.self) }

        try setup.rotateElsewhere()
        let runs = Locked(0)
        try database.write { db in
            runs.withLock { $0 += 1 }
            try db.execute("INSERT INTO notes(text) VALUES ('after')")
        }
        #expect(runs.withLock { $0 } == 1)
        try setup.rotateElsewhere()
        let count = try database.read { db in
            runs.withLock { $0 += 1 }
            return try db.queryValue("SELECT count(*) FROM notes", as: Int.self)
        }
        #expect(count == 2)
        #expect(runs.withLock { $0 } == 2)
        #expect(database.keys.currentID == "key-2")
        #expect(database.report.openedWithKeyID == "key-2")
        let followed = capture.entries.filter { $0.text.contains("followed a rotation made by another process") }
        #expect(followed.count == 2, "\(capture.entries.map(\.text))")
        for entry in capture.entries { for key in setup.hexKeys { #expect(!entry.text.contains(key)) } }
        // The file is on the newest key only.
        let keys = try KeysFile.load(path: setup.keysFile).keyList(forDatabase: setup.path)
        #expect(try EncryptedDatabase.check(path: setup.path, keys: keys).openedWithKeyID == "key-2")
    }

    @Test("a pool of 5 readers, all idle on the old key, after a rotation made elsewhere: the read succeeds once, every old reader is closed")
    func idleReadersOfTheOldKeyClosed() throws {
        // Five reads held open at once leave five idle readers on key-0. Unless following the
        // rotation closes them, each retry lands on another stale reader and the read fails with
        // SQLite error 26 after its 3 retries (checked: it does when ReaderPool.replaceKey keeps them).
        var setup = try Setup()
        let database = try EncryptedDatabase(path: setup.path, keysFile: setup.keysFile, options: OpenOptions(concurrentReaders: 5))
        try database.write { db in try db.execute("INSERT INTO notes(text) VALUES ('before')") }
        let held = try PooledReads.holdAtOnce(database, count: 5, { try $0.queryValue("SELECT count(*) FROM notes", as: Int.self) ?? -1 }) {
            #expect((database.readers?.openCount ?? 0) == 5)
        }
        #expect(held == Array(repeating: 1, count: 5))
        #expect((database.readers?.openCount ?? 0) == 5, "five idle readers on key-0")

        try setup.rotateElsewhere()
        let runs = Locked(0)
        let count = try database.read { db in
            runs.withLock { $0 += 1 }
            return try db.queryValue("SELECT count(*) FROM notes", as: Int.self)
        }
        #expect(count == 1)
        #expect(runs.withLock { $0 } == 1)
        #expect(database.report.openedWithKeyID == "key-1")
        // Every reader of key-0 was closed: the one open now is the one that served the read.
        #expect((database.readers?.openCount ?? 0) == 1)
        let again = try PooledReads.holdAtOnce(database, count: 5, { try $0.queryValue("SELECT count(*) FROM notes", as: Int.self) ?? -1 })
        #expect(again == Array(repeating: 1, count: 5))
    }

    @Test("async reads on a pool follow a rotation made elsewhere (the idle reader on the old key meets it in the task), each closure run once; a closure's own 'not a database' is not retried")
    func asyncPooledReadsFollow() async throws {
        var setup = try Setup()
        let database = try EncryptedDatabase(path: setup.path, keysFile: setup.keysFile, options: OpenOptions(concurrentReaders: 2))
        try await database.write { db in try db.execute("INSERT INTO notes(text) VALUES ('before')") }
        _ = try await database.read { db in try db.queryValue("SELECT count(*) FROM notes", as: Int.self) }
        #expect((database.readers?.openCount ?? 0) == 1, "a reader on key-0, idle")

        try setup.rotateElsewhere()
        let runs = Locked(0)
        let count = try await database.read { db in
            runs.withLock { $0 += 1 }
            return try db.queryValue("SELECT count(*) FROM notes", as: Int.self)
        }
        #expect(count == 1)
        #expect(runs.withLock { $0 } == 1)
        #expect(database.report.openedWithKeyID == "key-1")
        #expect(database.readers?.readerKey.id == "key-1")

        let failure = SQLiteError(code: .notADatabase, message: "from the closure")
        await #expect(throws: failure) { try await database.read { _ in runs.withLock { $0 += 1 }; throw failure } }
        #expect(runs.withLock { $0 } == 2)
    }

    @Test("a key provider is called again when the file was rotated elsewhere")
    func followsFromProvider() throws {
        var setup = try Setup()
        let calls = Locked(0)
        let (path, keysFile) = (setup.path, setup.keysFile)
        let database = try EncryptedDatabase(path: path, keyProvider: {
            calls.withLock { $0 += 1 }
            return try KeysFile.load(path: keysFile).keyList(forDatabase: path)
        })
        #expect(calls.withLock { $0 } == 1)
        try setup.rotateElsewhere()
        try database.writeWithoutTransaction { db in try db.execute("INSERT INTO notes(text) VALUES ('x')") }
        #expect(calls.withLock { $0 } >= 2)
        #expect(database.keys.currentID == "key-1")
    }

    @Test("a list given once cannot follow: the error says so, and the closure never ran")
    func fixedListExplains() throws {
        var setup = try Setup()
        let keys = try KeysFile.load(path: setup.keysFile).keyList(forDatabase: setup.path)
        let database = try EncryptedDatabase(path: setup.path, keys: keys)
        try setup.rotateElsewhere()
        let runs = Locked(0)
        do {
            try database.write { db in runs.withLock { $0 += 1 }; try db.execute("INSERT INTO notes(text) VALUES ('x')") }
            Issue.record("the write succeeded on a file rotated to a key the list lacks")
        } catch let error as EncryptedDatabaseError {
            guard case .keyUnavailable = error else { Issue.record("\(error)"); return }
            #expect(error.category == .keyConfiguration)
            #expect(error.description.contains("given once"), "\(error)")
            #expect(error.description.contains("keysFile"), "\(error)")
        }
        #expect(runs.withLock { $0 } == 0)
    }

    @Test("a key whose environment variable this process does not have: the error names the variable and says why")
    func environmentVariableAfterStart() throws {
        let setup = try Setup()
        let database = try EncryptedDatabase(path: setup.path, keysFile: setup.keysFile)
        // The operator appends a key kept in an environment variable this process never had, and
        // rotates with a process that has it.
        let variable = "ENCRYPTEDSQLITE_TEST_UNSET_\(UUID().uuidString.prefix(8))"
        let newKey = TestKeys.hex()
        try setup.writeKeys(extra: "      - id: key-1\n        env: \(variable)\n        format: hex\n")
        let other = try EncryptedDatabase(path: setup.path, keys: KeysFile.load(path: setup.keysFile).keyList(forDatabase: setup.path, environment: [variable: newKey]))
        #expect(other.report.rotated)
        do {
            _ = try database.read { db in try db.queryValue("SELECT count(*) FROM notes", as: Int.self) }
            Issue.record("the read succeeded without the key")
        } catch let error as EncryptedDatabaseError {
            guard case .keyUnavailable = error else { Issue.record("\(error)"); return }
            #expect(error.description.contains(variable), "\(error)")
            #expect(error.description.contains("after it started"), "\(error)")
            #expect(!error.description.contains(newKey))
        }
    }

    @Test("a closure's own failure is never retried, even SQLite's 'not a database'")
    func closureFailureNotRetried() throws {
        let setup = try Setup()
        let database = try EncryptedDatabase(path: setup.path, keysFile: setup.keysFile, options: OpenOptions(concurrentReaders: 2))
        let runs = Locked(0)
        let failure = SQLiteError(code: .notADatabase, message: "from the closure")
        #expect(throws: failure) { try database.write { _ in runs.withLock { $0 += 1 }; throw failure } }
        #expect(throws: failure) { try database.read { _ in runs.withLock { $0 += 1 }; throw failure } }
        #expect(throws: failure) { try database.writeWithoutTransaction { _ in runs.withLock { $0 += 1 }; throw failure } }
        #expect(runs.withLock { $0 } == 3)
    }

    @Test("rotateToCurrentKey reads the Keys file again and rotates to the key appended since the open")
    func rotateToAppendedKey() throws {
        var setup = try Setup()
        let database = try EncryptedDatabase(path: setup.path, keysFile: setup.keysFile, options: OpenOptions(concurrentReaders: 2))
        setup.hexKeys.append(TestKeys.hex())
        try setup.writeKeys()
        let rotation = try database.rotateToCurrentKey()
        #expect(rotation?.toKeyID == "key-1")
        #expect(database.report.currentKeyID == "key-1")
        try database.write { db in try db.execute("INSERT INTO notes(text) VALUES ('x')") }
        #expect(try database.read { db in try db.queryValue("SELECT count(*) FROM notes", as: Int.self) } == 1)
        #expect(try database.rotateToCurrentKey() == nil)
    }

    @Test("a Keys file that cannot be read at open is a keyUnavailable error naming it")
    func unreadableKeysFile() throws {
        let directory = TemporaryDirectory("elsewhere-missing")
        #expect {
            _ = try EncryptedDatabase(path: directory.file("app.sqlite"), keysFile: directory.file("Keys"))
        } throws: { error in
            guard let error = error as? EncryptedDatabaseError, case .keyUnavailable = error else { return false }
            return error.description.contains(directory.file("Keys"))
        }
    }
}
