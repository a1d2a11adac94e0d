@testable import CipherFormats
import DurableFiles
@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Testing
import TestSupport

/// A database on a passphrase key (so that a key derivation per reader would show), with a table.
struct SharedDatabase {
    let directory = TemporaryDirectory("concurrency")
    let ring: TestKeyring
    let path: String
    let database: EncryptedDatabase

    init(readers: Int, kinds: [SourceKind] = [.passphrase], rotate: Bool = true) throws {
        ring = TestKeyring(kinds, in: directory)
        path = directory.file("shared.sqlite")
        if kinds.count > 1 {
            try Fixture.createWithLibrary(at: path, keys: ring.only(0, database: path), rows: 10)
        }
        database = try EncryptedDatabase(
            path: path, keys: ring.keyList(database: path),
            options: OpenOptions(createIfMissing: true, rotateToCurrentKey: rotate, concurrentReaders: readers))
        try database.write { db in try db.execute("CREATE TABLE IF NOT EXISTS items(id INTEGER PRIMARY KEY, task INTEGER, n INTEGER)") }
    }
}

@Suite("Concurrent access")
struct ConcurrencyTests {
    @Test("many tasks writing and reading through one database lose no rows", arguments: [0, 4])
    func manyTasks(readers: Int) async throws {
        let shared = try SharedDatabase(readers: readers)
        let database = shared.database
        let tasks = 8, perTask = 100
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<tasks {
                group.addTask {
                    for n in 0..<perTask {
                        try await database.write { db in try db.execute("INSERT INTO items(task, n) VALUES (?, ?)", [task, n]) }
                    }
                }
                group.addTask {
                    var last = 0
                    for _ in 0..<perTask / 4 {
                        let count = try await database.read { db in try db.queryValue("SELECT count(*) FROM items", as: Int.self) ?? 0 }
                        #expect(count >= last)  // snapshots only move forward
                        last = count
                    }
                }
            }
            try await group.waitForAll()
        }
        let count = try await database.read { try $0.queryValue("SELECT count(*) FROM items", as: Int.self) }
        #expect(count == tasks * perTask)
        let distinct = try await database.read { try $0.queryValue("SELECT count(DISTINCT task * 1000 + n) FROM items", as: Int.self) }
        #expect(distinct == tasks * perTask)
        // Threads, not just tasks.
        DispatchQueue.concurrentPerform(iterations: 8) { index in
            try? database.write { db in try db.execute("INSERT INTO items(task, n) VALUES (?, ?)", [100 + index, 0]) }
        }
        let after = try await database.read { try $0.queryValue("SELECT count(*) FROM items", as: Int.self) }
        #expect(after == tasks * perTask + 8)
    }

    @Test("pooled readers use the derived raw key and salt (no key derivation each) and run concurrently")
    func pool() throws {
        let shared = try SharedDatabase(readers: 2)
        let key = try #require(shared.database.readers?.readerKey.material)
        #expect(key.kind == .rawKey)
        key.withSQLCipherBytes { #expect($0.count == 99) }  // x'<64 hex key><32 hex salt>'
        #expect(try shared.database.writeWithoutTransaction { try $0.journalMode() } == "wal")

        // Two reads overlap: the first waits inside its closure until the second has run.
        let secondRan = DispatchSemaphore(value: 0)
        let firstInside = DispatchSemaphore(value: 0)
        let firstDone = DispatchSemaphore(value: 0)
        let overlapped = Locked(false)
        OwnThread.start {
            _ = try? shared.database.read { _ in
                firstInside.signal()
                overlapped.withLock { $0 = secondRan.wait(timeout: .now() + 120) == .success }
            }
            firstDone.signal()
        }
        #expect(firstInside.wait(timeout: .now() + 120) == .success, "the first read did not start")  // it holds a reader now
        _ = try shared.database.read { db in try db.queryValue("SELECT 1", as: Int.self) }
        secondRan.signal()
        #expect(firstDone.wait(timeout: .now() + 120) == .success)
        #expect(overlapped.withLock { $0 }, "the second read ran only after the first one gave its reader back")
    }

    @Test("a read cannot write, with or without a pool", arguments: [0, 2])
    func readIsReadOnly(readers: Int) throws {
        let shared = try SharedDatabase(readers: readers)
        #expect {
            try shared.database.read { db in try db.execute("INSERT INTO items(task, n) VALUES (1, 1)") }
        } throws: { ($0 as? SQLiteError)?.code.primary == .readOnly }
        try shared.database.write { db in try db.execute("INSERT INTO items(task, n) VALUES (1, 1)") }
        #expect(try shared.database.read { try $0.queryValue("SELECT count(*) FROM items", as: Int.self) } == 1)
    }

    @Test("a rotation while readers are active leaves no reader on the old key")
    func rotationWithActiveReaders() async throws {
        let shared = try SharedDatabase(readers: 3, kinds: [.passphrase, .hex], rotate: false)
        let database = shared.database
        #expect(database.report.openedWithKeyID == "k1")
        let oldReaderKey = try #require(database.readers?.readerKey.material)
        let stop = ManagedAtomicFlag()
        let readCounts = (0..<3).map { _ in ProgressCounter() }
        try await withThrowingTaskGroup(of: Int.self) { group in
            for reader in readCounts {
                group.addTask {
                    var reads = 0
                    while !stop.isSet {
                        _ = try await database.read { db in try db.queryValue("SELECT count(*) FROM people", as: Int.self) }
                        reads += 1
                        reader.increment()
                    }
                    return reads
                }
            }
            // Each task has read on the old key (a count of reads, not a sleep).
            for reader in readCounts { #expect(await reader.reached(2), "a reader task did not read before the rotation") }
            let rotation = try await Task { try database.rotateToCurrentKey() }.value
            #expect(rotation?.toKeyID == "k2")
            try await database.write { db in try db.execute("INSERT INTO items(task, n) VALUES (7, 7)") }
            // Each task has read again after the rotation: 2 more reads, the second begun after it.
            for reader in readCounts { #expect(await reader.reached(reader.value + 2), "a reader task did not read after the rotation") }
            stop.set()
            var total = 0
            for try await reads in group { total += reads }
            #expect(total > 0)
        }
        let newReaderKey = try #require(database.readers?.readerKey.material)
        #expect(!newReaderKey.isSameSecret(as: oldReaderKey))
        let sevens = try await database.read { try $0.queryValue("SELECT count(*) FROM items WHERE task = 7", as: Int.self) }
        #expect(sevens == 1)
        #expect(try SQLCipherShell.opens(shared.path, with: shared.ring.keys[1].shellKey))
        #expect(try !SQLCipherShell.opens(shared.path, with: shared.ring.keys[0].shellKey))
    }

    @Test("calling the database from inside its own access closure traps with a message instead of deadlocking")
    func reentrancy() async throws {
        // A precondition failure, not any failure: the trap instruction's signal (SIGILL from ud2 on
        // x86_64, SIGTRAP from brk on arm64), with the guard's message.
        #if arch(x86_64)
        let trap = SIGILL
        #else
        let trap = SIGTRAP
        #endif
        let result = try #require(await #expect(processExitsWith: .signal(trap), observing: [\.standardErrorContent]) {
            try Self.readInsideWrite()
        })
        let stderr = String(decoding: result.standardErrorContent, as: UTF8.self)
        #expect(stderr.contains("""
            EncryptedDatabase.read was called from inside another read or write closure of the same \
            database on the same thread, which would deadlock.
            """), "\(stderr)")
    }

    @Test("backup(to:) from inside a write closure traps with a message instead of hanging")
    func backupInsideWrite() async throws {
        // Before the writer's lock knew its owner, this hung for ever (the child never ended).
        let result = try #require(await #expect(processExitsWith: .signal(Self.trap), observing: [\.standardErrorContent]) {
            try Self.writerCallInsideWrite(backup: true)
        })
        Self.expectWriterMessage(result.standardErrorContent)
    }

    @Test("rotateToCurrentKey() from inside a write closure traps with a message instead of hanging")
    func rotationInsideWrite() async throws {
        let result = try #require(await #expect(processExitsWith: .signal(Self.trap), observing: [\.standardErrorContent]) {
            try Self.writerCallInsideWrite(backup: false)
        })
        Self.expectWriterMessage(result.standardErrorContent)
    }

    /// The signal of a precondition failure: the trap instruction's (SIGILL from ud2 on x86_64,
    /// SIGTRAP from brk on arm64).
    #if arch(x86_64)
    static let trap = SIGILL
    #else
    static let trap = SIGTRAP
    #endif

    static func expectWriterMessage(_ standardError: [UInt8]) {
        let stderr = String(decoding: standardError, as: UTF8.self)
        #expect(stderr.contains("was called from inside a write closure of the same database on the same thread, which would deadlock"), "\(stderr)")
    }

    /// `backup(to:)` (or `rotateToCurrentKey()`) inside a write, in synchronous code.
    static func writerCallInsideWrite(backup: Bool) throws {
        let scratch = try Scratch()
        try scratch.database.write { db in
            try db.execute("CREATE TABLE t(x)")
            if backup {
                try scratch.database.backup(to: scratch.directory.file("backup.sqlite"))
            } else {
                _ = try scratch.database.rotateToCurrentKey()
            }
        }
    }

    /// A read inside a write, in synchronous code (the blocking overloads are unavailable from
    /// the exit test's async closure).
    static func readInsideWrite() throws {
        let scratch = try Scratch()
        try scratch.database.write { _ in
            _ = try scratch.database.read { db in try db.queryValue("SELECT 1", as: Int.self) }
        }
    }

    @Test("a released database closes every connection, even ones with cached statements")
    func releaseClosesConnections() throws {
        let directory = TemporaryDirectory("release")
        let ring = TestKeyring([.hex], in: directory)
        let path = directory.file("app.sqlite")
        do {
            let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path),
                                                 options: OpenOptions(createIfMissing: true, concurrentReaders: 2))
            try database.write { db in try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY)") }
            _ = try database.read { db in try db.query(Int64.self, "SELECT id FROM t") }   // caches a statement on a reader
            _ = try database.writeWithoutTransaction { db in try db.cachedStatement("SELECT 1") }
        }
        // Leaving WAL mode needs every other connection to the file closed.
        let alone = try EncryptedDatabase(path: path, keys: ring.keyList(database: path))
        #expect(try alone.writeWithoutTransaction { try $0.queryValue("PRAGMA journal_mode = DELETE", as: String.self) } == "delete")
    }

    @Test("async write rolls back on error and returns values")
    func asyncVariants() async throws {
        struct Stop: Error {}
        let shared = try SharedDatabase(readers: 0)
        await #expect(throws: Stop.self) {
            try await shared.database.write { db in
                try db.execute("INSERT INTO items(task, n) VALUES (1, 1)")
                throw Stop()
            }
        }
        let inserted = try await shared.database.write { db -> Int64 in
            try db.execute("INSERT INTO items(task, n) VALUES (2, 2)")
            return db.lastInsertRowID
        }
        #expect(inserted == 1)
        let mode = try await shared.database.writeWithoutTransaction { try $0.journalMode() }
        #expect(mode == "delete")
    }
}

/// A flag set once, read from many tasks.
final class ManagedAtomicFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
