import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// `OpenOptions.prepareConnection` and `OpenOptions.foreignKeys`: what every connection the
/// application's code runs on gets — the writer and each pooled reader, when opened and when
/// reopened after a rotation — on real encrypted files.
@Suite("Per-connection setup: prepareConnection and foreign keys on the writer and every reader")
struct ConnectionSetupTests {
    /// How many times the setup ran, by access mode.
    final class Calls: @unchecked Sendable {
        private let lock = NSLock()
        private var counts: [Connection.AccessMode: Int] = [:]

        func record(_ mode: Connection.AccessMode) { lock.withLock { counts[mode, default: 0] += 1 } }
        var writers: Int { lock.withLock { counts[.readWrite, default: 0] } }
        var readers: Int { lock.withLock { counts[.readOnly, default: 0] } }
    }

    /// Options whose `prepareConnection` registers `shout(text)` and counts its runs.
    static func shoutingOptions(readers: Int, calls: Calls, rotate: Bool = true) -> OpenOptions {
        var options = OpenOptions(createIfMissing: true, rotateToCurrentKey: rotate, concurrentReaders: readers)
        options.prepareConnection = { db in
            calls.record(db.accessMode)
            try db.createFunction("shout", argumentCount: 1, deterministic: true) { arguments in
                if case .text(let text) = arguments[0] { return text.uppercased() + "!" } else { return nil }
            }
        }
        return options
    }

    /// Runs two reads that overlap — the first waits inside its closure until the second has run —
    /// so that the pool runs them on two readers; both call `sql`.
    static func twoOverlappingReads(_ database: EncryptedDatabase, _ sql: String) throws -> [String?] {
        let firstInside = DispatchSemaphore(value: 0)
        let secondRan = DispatchSemaphore(value: 0)
        let firstDone = DispatchSemaphore(value: 0)
        let first = ResultBox()
        OwnThread.start {
            first.set(Result {
                try database.read { db in
                    let value = try db.queryValue(sql, as: String.self)
                    firstInside.signal()
                    _ = secondRan.wait(timeout: .now() + 120)
                    return value
                }
            })
            firstInside.signal()  // in case the read failed before it got inside
            firstDone.signal()
        }
        #expect(firstInside.wait(timeout: .now() + 120) == .success)
        let second = Result { try database.read { db in try db.queryValue(sql, as: String.self) } }
        secondRan.signal()
        #expect(firstDone.wait(timeout: .now() + 120) == .success)
        return [try first.get(), try second.get()]
    }

    final class ResultBox: @unchecked Sendable {
        private let lock = NSLock()
        private var result: Result<String?, any Error> = .success(nil)
        func set(_ value: Result<String?, any Error>) { lock.withLock { result = value } }
        func get() throws -> String? { try lock.withLock { result }.get() }
    }

    @Test("a function registered in prepareConnection works in write, on two pooled readers at once, and after rotateToCurrentKey()")
    func functionOnEveryConnection() throws {
        let directory = TemporaryDirectory("setup")
        let ring = TestKeyring([.passphrase, .hex], in: directory)
        let path = directory.file("setup.sqlite")
        try Fixture.createWithLibrary(at: path, keys: ring.only(0, database: path), rows: 10)
        let calls = Calls()
        let database = try EncryptedDatabase(
            path: path, keys: ring.keyList(database: path), options: Self.shoutingOptions(readers: 2, calls: calls, rotate: false))
        #expect(database.report.openedWithKeyID == "k1")
        try database.write { db in
            try db.execute("CREATE TABLE notes(text TEXT NOT NULL)")
            try db.execute("INSERT INTO notes(text) VALUES (shout('hi'))")
        }
        #expect(try Self.twoOverlappingReads(database, "SELECT shout(text) FROM notes") == ["HI!!", "HI!!"])
        #expect(calls.writers == 1)
        #expect(calls.readers == 2)

        // The control: a function registered inside write {} exists on the writer only.
        try database.write { db in try db.createFunction("whisper", argumentCount: 1) { _ in "psst" } }
        #expect {
            try database.read { db in try db.queryValue("SELECT whisper(text) FROM notes", as: String.self) }
        } throws: { "\($0)".contains("no such function: whisper") }

        let rotation = try database.rotateToCurrentKey()
        #expect(rotation?.toKeyID == "k2")
        try database.write { db in try db.execute("INSERT INTO notes(text) VALUES (shout('again'))") }
        #expect(try Self.twoOverlappingReads(database, "SELECT shout(group_concat(text, ' ')) FROM notes") == ["HI! AGAIN!!", "HI! AGAIN!!"])
        // The rotated writer and both reopened readers ran it; the rotation's own connections did not.
        #expect(calls.writers == 2)
        #expect(calls.readers == 4)
    }

    @Test("the writer runs prepareConnection after the rotation and before the migrator, so migrations can use it")
    func writerOrder() throws {
        let directory = TemporaryDirectory("setup")
        let ring = TestKeyring([.passphrase, .hex], in: directory)
        let path = directory.file("setup.sqlite")
        try Fixture.createWithLibrary(at: path, keys: ring.only(0, database: path), rows: 10)
        var migrator = DatabaseMigrator()
        try migrator.registerMigration("0001_notes") { db in
            try db.execute("CREATE TABLE notes(text TEXT NOT NULL)")
            try db.execute("INSERT INTO notes(text) VALUES (shout('migrated'))")
        }
        let calls = Calls()
        let database = try EncryptedDatabase(
            path: path, keys: ring.keyList(database: path), options: Self.shoutingOptions(readers: 0, calls: calls), migrator: migrator)
        #expect(database.report.rotated)
        #expect(database.appliedMigrations == ["0001_notes"])
        #expect(try database.read { db in try db.queryValue("SELECT text FROM notes", as: String.self) } == "MIGRATED!")
        #expect(calls.writers == 1)
    }

    @Test("foreign keys are enforced by default on the writer and on pooled readers", arguments: [0, 2])
    func foreignKeysOnByDefault(readers: Int) throws {
        let directory = TemporaryDirectory("setup")
        let path = directory.file("fk.sqlite")
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "k", source: .hex(TestKeys.hex()))])
        let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(createIfMissing: true, concurrentReaders: readers))
        try database.write { db in
            try db.execute("CREATE TABLE parents(id INTEGER PRIMARY KEY); CREATE TABLE children(parent INTEGER NOT NULL REFERENCES parents(id))")
            try db.execute("INSERT INTO parents(id) VALUES (1); INSERT INTO children(parent) VALUES (1)")
        }
        #expect {
            try database.write { db in try db.execute("INSERT INTO children(parent) VALUES (99)") }
        } throws: { ($0 as? SQLiteError)?.code.primary == .constraint && "\($0)".contains("FOREIGN KEY") }
        #expect(try database.write { db in try db.queryValue("PRAGMA foreign_keys", as: Int.self) } == 1)
        #expect(try database.read { db in try db.queryValue("PRAGMA foreign_keys", as: Int.self) } == 1)
        #expect(try database.read { db in try db.queryValue("SELECT count(*) FROM children", as: Int.self) } == 1)
    }

    @Test("foreignKeys = false leaves them unenforced on the writer and on pooled readers", arguments: [0, 2])
    func foreignKeysOptOut(readers: Int) throws {
        let directory = TemporaryDirectory("setup")
        let path = directory.file("fk.sqlite")
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "k", source: .hex(TestKeys.hex()))])
        var options = OpenOptions(createIfMissing: true, concurrentReaders: readers)
        options.foreignKeys = false
        let database = try EncryptedDatabase(path: path, keys: keys, options: options)
        try database.write { db in
            try db.execute("CREATE TABLE parents(id INTEGER PRIMARY KEY); CREATE TABLE children(parent INTEGER NOT NULL REFERENCES parents(id))")
            try db.execute("INSERT INTO children(parent) VALUES (99)")
        }
        #expect(try database.write { db in try db.queryValue("PRAGMA foreign_keys", as: Int.self) } == 0)
        #expect(try database.read { db in try db.queryValue("PRAGMA foreign_keys", as: Int.self) } == 0)
        #expect(try database.read { db in try db.queryValue("SELECT count(*) FROM children", as: Int.self) } == 1)
    }

    struct SetupRefused: Error, CustomStringConvertible {
        var description: String { "setup refused" }
    }

    @Test("a throwing prepareConnection fails the open (the file stays usable) or the read whose reader it fails on")
    func throwingSetup() throws {
        let directory = TemporaryDirectory("setup")
        let path = directory.file("throws.sqlite")
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "k", source: .hex(TestKeys.hex()))])
        var failing = OpenOptions(createIfMissing: true)
        failing.prepareConnection = { _ in throw SetupRefused() }
        #expect {
            _ = try EncryptedDatabase(path: path, keys: keys, options: failing)
        } throws: { error in
            guard case .ioFailure(path, let operation, let detail) = error as? EncryptedDatabaseError else { return false }
            return operation.contains("prepareConnection") && detail == "setup refused"
        }

        var readersFail = OpenOptions(concurrentReaders: 1)
        readersFail.prepareConnection = { db in if db.accessMode == .readOnly { throw SetupRefused() } }
        let database = try EncryptedDatabase(path: path, keys: keys, options: readersFail)
        try database.write { db in try db.execute("CREATE TABLE t(x)") }
        #expect(throws: SetupRefused.self) { try database.read { db in try db.queryValue("SELECT count(*) FROM t", as: Int.self) } }
        #expect(try database.write { db in try db.queryValue("SELECT count(*) FROM t", as: Int.self) } == 0)
    }
}
