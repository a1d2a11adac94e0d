import DurableFiles
@testable import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// What a service (an HTTP server, a Fluent driver) needs beyond read and write: a transaction
/// whose body is async, a bound on the wait for the writer, `close()`, and a cheap probe.
///
/// Every wait here is driven: the writer is held by a thread that releases it when the test says
/// so, and the test waits for the queue to hold the writes it expects, never for a time to pass.
/// The limits below (100-300 ms) are deadlines the library must keep while the writer stays held
/// for as long as the test needs; a slow machine makes them late, never wrong.
@Suite("Service API: writeTransaction, bounded writer waits, close() and probe()")
struct ServiceAPITests {
    /// The writer, held by a thread of its own through a blocking `write` (as a rotation on
    /// another thread holds it) until ``release()``.
    final class WriterHolder: Sendable {
        private let released = DispatchSemaphore(value: 0)
        private let ended = DispatchSemaphore(value: 0)
        private let guardFired = Locked(false)

        init(_ database: EncryptedDatabase) {
            let started = DispatchSemaphore(value: 0)
            let released = self.released, ended = self.ended, guardFired = self.guardFired
            Thread {
                try? database.write { _ in
                    started.signal()
                    // A hang guard only (a library that ignores its limits would otherwise hang the
                    // suite): the test releases the writer long before, and `release()` fails the
                    // test when the guard let it go instead.
                    // 900 s: under the suite's 1,500 s limit, far above any run seen (a starved
                    // cooperative pool once delayed this test past a 300 s guard).
                    if released.wait(timeout: .now() + 900) == .timedOut { guardFired.withLock { $0 = true } }
                }
                ended.signal()
            }.start()
            started.wait()
        }

        /// Lets the writer go and waits until the holding write returned; records an issue when
        /// the hang guard had let it go first (every expectation made while it was "held" is void).
        func release(sourceLocation: SourceLocation = #_sourceLocation) async {
            #expect(!guardFired.withLock { $0 }, "the writer holder's hang guard (900 s) let the writer go before the test did", sourceLocation: sourceLocation)
            released.signal()
            let ended = self.ended
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                Thread {
                    ended.wait()
                    continuation.resume()
                }.start()
            }
        }
    }

    /// Counts closure runs across threads.
    final class Runs: Sendable {
        private let count = Locked(0)
        func ran() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }
    }

    struct Refused: Error, Equatable {}

    static func database(readers: Int = 0, limit: Duration? = nil, key: String = TestKeys.hex(), _ directory: TemporaryDirectory) throws -> EncryptedDatabase {
        let path = directory.file("db.sqlite")
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "k", source: .hex(key))])
        var options = OpenOptions(createIfMissing: true)
        options.writerWaitLimit = limit
        let database = try EncryptedDatabase(path: path, keys: keys, options: options)
        try database.writeWithoutTransaction { db in
            if readers > 0 { _ = try db.queryValue("PRAGMA journal_mode = WAL", as: String.self) }
            try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, note TEXT)")
        }
        guard readers > 0 else { return database }
        options.concurrentReaders = readers
        return try EncryptedDatabase(path: path, keys: keys, options: options)
    }

    static func notes(_ database: EncryptedDatabase) async throws -> [String] {
        try await database.read { db in try db.query("SELECT note FROM t ORDER BY id").map { try $0.get(0, as: String.self) } }
    }

    /// Waits until `count` async writes wait for the writer: the order comes from that count.
    /// Polled every millisecond: a `Task.yield()` loop kept a thread of the 2-thread cooperative
    /// pool spinning (a quarter of the processor in a perf sample of a SQLCipher 4 run) and
    /// starved the very tasks it waited for, past the writer holder's guard.
    static func untilQueued(_ database: EncryptedDatabase, _ count: Int) async {
        await until { database.writer.pendingWrites.waiting.withLock({ $0 }) >= count }
    }

    /// Waits until `condition` holds, polling it every millisecond (paces the poll; not an order).
    static func until(_ condition: () -> Bool) async {
        while !condition() { try? await Task.sleep(for: .milliseconds(1)) }
    }

    // MARK: writeTransaction

    @Test("writeTransaction: statements of an async body, with awaits between them, commit together; a write from another task waits until the commit", arguments: [0, 2])
    func transactionCommits(readers: Int) async throws {
        let directory = TemporaryDirectory("session")
        let key = TestKeys.hex()
        let database = try Self.database(readers: readers, key: key, directory)
        let other = Locked<Task<Void, any Error>?>(nil)
        let seenInside = try await database.writeTransaction { session in
            try await session.run { db in try db.execute("INSERT INTO t(note) VALUES ('first')") }
            other.withLock { task in
                task = Task { try await database.write { db in try db.execute("INSERT INTO t(note) VALUES ('other')") } }
            }
            // The other task's write is queued behind this transaction, not run.
            await Self.untilQueued(database, 1)
            await Task.yield()
            try await session.run { db in try db.execute("INSERT INTO t(note) VALUES ('second')") }
            return try await session.run { db in try db.query("SELECT note FROM t ORDER BY id").map { try $0.get(0, as: String.self) } }
        }
        #expect(seenInside == ["first", "second"])
        let otherWrite = try #require(other.withLock { $0 })
        try await otherWrite.value
        #expect(try await Self.notes(database) == ["first", "second", "other"])
        // Another connection sees the commit.
        #expect(try SQLCipherShell.run(database.path, key: .hex(key), "SELECT group_concat(note) FROM t;").stdout.contains("first,second,other"))
    }

    @Test("writeTransaction: when the body throws, every statement it ran is rolled back and the body's error comes out unchanged; the database goes on")
    func transactionRollsBack() async throws {
        let directory = TemporaryDirectory("session")
        let database = try Self.database(directory)
        await #expect(throws: Refused.self) {
            try await database.writeTransaction { session in
                try await session.run { db in try db.execute("INSERT INTO t(note) VALUES ('gone')") }
                try await session.run { db in try db.execute("INSERT INTO t(note) VALUES ('gone too')") }
                throw Refused()
            }
        }
        #expect(try await Self.notes(database) == [])
        // A statement error inside the body: the body may catch it and go on, or let it roll back.
        let kept = try await database.writeTransaction { session in
            try await session.run { db in try db.execute("INSERT INTO t(id, note) VALUES (1, 'kept')") }
            do {
                try await session.run { db in try db.execute("INSERT INTO t(id, note) VALUES (1, 'duplicate')") }
            } catch let error as SQLiteError {
                #expect(error.code.primary == .constraint)
            }
            return try await session.run { db in try db.queryValue("SELECT count(*) FROM t", as: Int.self) }
        }
        #expect(kept == 1)
        try await database.write { db in try db.execute("INSERT INTO t(note) VALUES ('after')") }
        #expect(try await Self.notes(database) == ["kept", "after"])
    }

    @Test("a WriteSession used after its body ended throws transactionEnded and runs nothing")
    func sessionAfterBody() async throws {
        let directory = TemporaryDirectory("session")
        let database = try Self.database(directory)
        let kept = try await database.writeTransaction { session in session }
        let runs = Runs()
        await #expect(throws: EncryptedDatabaseError.transactionEnded(path: database.path)) {
            try await kept.run { db in
                runs.ran()
                try db.execute("INSERT INTO t(note) VALUES ('late')")
            }
        }
        #expect(runs.value == 0)
        #expect(try await Self.notes(database) == [])
    }

    // MARK: Bounded waits

    @Test("while another thread holds the writer (as a rotation does), an async write with a limit gives up with writerWaitExpired and its closure never runs, also after the writer is free", arguments: [0, 2])
    func writeWaitExpires(readers: Int) async throws {
        let directory = TemporaryDirectory("wait")
        let database = try Self.database(readers: readers, limit: .milliseconds(300), directory)
        let holder = WriterHolder(database)
        let runs = Runs()
        // The option's limit, and the call's own.
        await #expect(throws: EncryptedDatabaseError.writerWaitExpired(path: database.path, waited: .milliseconds(300))) {
            try await database.write { db in
                runs.ran()
                try db.execute("INSERT INTO t(note) VALUES ('never')")
            }
        }
        await #expect(throws: EncryptedDatabaseError.writerWaitExpired(path: database.path, waited: .milliseconds(100))) {
            try await database.write(waitingAtMost: .milliseconds(100)) { db in
                runs.ran()
                try db.execute("INSERT INTO t(note) VALUES ('never')")
            }
        }
        await #expect(throws: EncryptedDatabaseError.writerWaitExpired(path: database.path, waited: .milliseconds(300))) {
            try await database.writeWithoutTransaction { db in
                runs.ran()
                try db.execute("INSERT INTO t(note) VALUES ('never')")
            }
        }
        let bodies = Runs()
        await #expect(throws: EncryptedDatabaseError.writerWaitExpired(path: database.path, waited: .milliseconds(100))) {
            try await database.writeTransaction(waitingAtMost: .milliseconds(100)) { _ in bodies.ran() }
        }
        if readers == 0 {
            // Without a pool, reads run on the writer: bounded the same way.
            await #expect(throws: EncryptedDatabaseError.writerWaitExpired(path: database.path, waited: .milliseconds(300))) {
                try await database.read { _ in runs.ran() }
            }
        } else {
            // With a pool, reads go on while the writer is held.
            #expect(try await Self.notes(database) == [])
        }
        await holder.release()
        // Everything given up stays undone once the writer is free: the next write runs alone.
        try await database.write { db in try db.execute("INSERT INTO t(note) VALUES ('after')") }
        #expect(runs.value == 0)
        #expect(bodies.value == 0)
        #expect(try await Self.notes(database) == ["after"])
        let error = EncryptedDatabaseError.writerWaitExpired(path: database.path, waited: .milliseconds(300))
        #expect(error.category == .busy)
        #expect(error.description.contains("waited 300 ms for the writer"))
    }

    @Test("during a real rotation in the foreground (stopped by the pausing VFS at its EXCLUSIVE lock), a write with a limit and the probe answer within their limits; the write never runs, and the rotation completes")
    func boundedDuringRotation() async throws {
        let directory = TemporaryDirectory("wait-rotation")
        let path = directory.file("db.sqlite")
        let oldHex = TestKeys.hex(), newHex = TestKeys.hex()
        let old = DatabaseKey(id: "old", source: .hex(oldHex))
        let new = DatabaseKey(id: "new", source: .hex(newHex))
        // The VFS sees only connections opened after it is installed: watch first.
        let watch = VFSWatch(folder: directory.path)
        defer { watch.stop() }
        let list = Locked(try KeyList(database: path, keys: [old]))
        let database = try EncryptedDatabase(path: path, keyProvider: { list.withLock { $0 } }, options: OpenOptions(createIfMissing: true))
        try await database.write { db in try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, note TEXT); INSERT INTO t(note) VALUES ('before')") }
        list.withLock { $0 = try! KeyList(database: path, keys: [old, new]) }
        let pause = watch.pause { $0.actor == "rotator" && $0.isLockTaken(FileLockLevel.exclusive) }
        // Started on its thread now: not from a Task, which waits for a free thread of the pool.
        let rotation = OwnThread.started {
            VFSWatch.setActor("rotator")
            defer { VFSWatch.setActor(nil) }
            return try database.rotateToCurrentKey()?.toKeyID
        }
        let reached = try await OwnThread.run { pause.waitUntilReached() != nil }
        guard reached else {
            pause.release()
            let outcome: String
            do { outcome = "it returned \(String(describing: try await rotation.value()))" } catch { outcome = "it threw \(error)" }
            Issue.record("the rotation never took its EXCLUSIVE lock: \(outcome)")
            return
        }
        // The rotation holds the writer and the file now, for as long as the test keeps it there.
        // A hang guard only: a library that ignored the limit would wait here for the release. When
        // it fires the test fails (its expectations were made with the file no longer held).
        let guardFired = Locked(false)
        let hangGuard = Task {
            try await Task.sleep(for: .seconds(300))
            guardFired.withLock { $0 = true }
            pause.release()
        }
        defer { hangGuard.cancel() }
        let runs = Runs()
        await #expect(throws: EncryptedDatabaseError.writerWaitExpired(path: path, waited: .milliseconds(200))) {
            try await database.write(waitingAtMost: .milliseconds(200)) { db in
                runs.ran()
                try db.execute("INSERT INTO t(note) VALUES ('never')")
            }
        }
        let probe = await database.probe(waitingAtMost: .milliseconds(100))
        #expect(probe.status == .busy, "\(probe)")
        #expect(probe.keyID == "old" && probe.currentKeyID == "new" && probe.needsRotation)
        #expect(!guardFired.withLock { $0 }, "the hang guard (300 s) released the rotation before the test did")
        pause.release()
        #expect(try await rotation.value() == "new")
        try await database.write { db in try db.execute("INSERT INTO t(note) VALUES ('after')") }
        #expect(runs.value == 0)
        #expect(try await Self.notes(database) == ["before", "after"])
        #expect(try SQLCipherShell.opens(path, with: .hex(newHex)))
        #expect(try !SQLCipherShell.opens(path, with: .hex(oldHex)))
        let rotated = await database.probe()
        #expect(rotated.status == .ok && rotated.keyID == "new" && !rotated.needsRotation)
    }

    @Test("cancelling a task whose write waits for the writer ends the wait at once with CancellationError; the closure never runs")
    func cancelledWait() async throws {
        let directory = TemporaryDirectory("wait")
        let database = try Self.database(directory)
        let holder = WriterHolder(database)
        let runs = Runs()
        let waiting = Task {
            try await database.write { db in
                runs.ran()
                try db.execute("INSERT INTO t(note) VALUES ('never')")
            }
        }
        let session = Task {
            try await database.writeTransaction { session in
                runs.ran()
                try await session.run { db in try db.execute("INSERT INTO t(note) VALUES ('never')") }
            }
        }
        await Self.untilQueued(database, 2)
        waiting.cancel()
        session.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        await #expect(throws: CancellationError.self) { try await session.value }
        // Both callers came back while the writer is still held.
        await holder.release()
        try await database.write { db in try db.execute("INSERT INTO t(note) VALUES ('after')") }
        #expect(runs.value == 0)
        #expect(try await Self.notes(database) == ["after"])
        // A task cancelled before it asks does not wait at all.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await database.write { _ in runs.ran() }
        }
        await #expect(throws: CancellationError.self) { try await early.value }
        #expect(runs.value == 0)
    }

    // MARK: close()

    /// The descriptors of this process open on `path` or its `-wal`, `-shm` and `-journal` (not
    /// its step-aside `-lock` file, whose descriptor stays until the database goes).
    static func descriptors(on path: String) -> Int {
        let links = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return links.filter { link in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(link)") else { return false }
            return target.hasPrefix(path) && !target.hasSuffix("-lock")
        }.count
    }

    @Test("close() lets the writes queued before it commit, then closes every connection of the file; every later call throws closed; a second close returns", arguments: [0, 2])
    func closeWaitsThenCloses(readers: Int) async throws {
        let directory = TemporaryDirectory("close")
        let key = TestKeys.hex()
        let database = try Self.database(readers: readers, key: key, directory)
        // Open the pool's readers.
        _ = try await Self.notes(database)
        #expect(Self.descriptors(on: database.path) > 0)
        let holder = WriterHolder(database)
        let writes = (1...5).map { index in
            Task { try await database.write { db in try db.execute("INSERT INTO t(note) VALUES (?)", ["queued \(index)"]) } }
        }
        await Self.untilQueued(database, 5)
        let closing = Task { await database.close() }
        // close() waits for the writes queued before it, which wait for the held writer.
        await Self.until { database.closing.withLock { $0 } }
        await #expect(throws: EncryptedDatabaseError.closed(path: database.path)) {
            try await database.write { db in try db.execute("INSERT INTO t(note) VALUES ('too late')") }
        }
        await holder.release()
        await closing.value
        for write in writes { try await write.value }
        #expect(Self.descriptors(on: database.path) == 0, "close() left descriptors of the database open")
        let closed = EncryptedDatabaseError.closed(path: database.path)
        await #expect(throws: closed) { try await database.read { _ in 1 } }
        await #expect(throws: closed) { try await database.writeTransaction { _ in 1 } }
        await #expect(throws: closed) { try await database.rotateToCurrentKey() }
        #expect(throws: closed) { try database.rotateInBackground() }
        #expect(closed.category == .closed)
        await database.close()
        // What was queued is on disk, seen by another process.
        let stored = try SQLCipherShell.run(database.path, key: .hex(key), "SELECT count(*) FROM t WHERE note LIKE 'queued %';")
        #expect(stored.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "5")
    }

    @Test("close() during a background rotation cancels it: close returns, the file stays on its old key with every row, and the next open rotates it (async close, and the blocking one on a thread)", arguments: [false, true])
    func closeDuringBackgroundRotation(blocking: Bool) async throws {
        let directory = TemporaryDirectory("close")
        let path = directory.file("db.sqlite")
        let oldHex = TestKeys.hex()
        let old = DatabaseKey(id: "old", source: .hex(oldHex))
        let new = DatabaseKey(id: "new", source: .hex(TestKeys.hex()))
        try Self.makeLargeFile(at: path, key: old)
        // The copy's first step waits on the rotation's thread until close() cancelled it: the
        // order comes from the hook, not from the copy's speed.
        let rotationBox = Locked<BackgroundRotation?>(nil)
        RotationFollower.afterCopyStep.withLock { hooks in
            hooks[path] = {
                let deadline = ContinuousClock.now + .seconds(300)   // a hang guard only
                while rotationBox.withLock({ $0 })?.isCancelled != true && ContinuousClock.now < deadline { usleep(1000) }
            }
        }
        defer { RotationFollower.afterCopyStep.withLock { $0[path] = nil } }
        let keys = try KeyList(database: path, keys: [old, new])
        var options = OpenOptions(backgroundRotation: true)
        options.concurrentReaders = 2
        let database = try EncryptedDatabase(path: path, keys: keys, options: options)
        let rotation = try #require(database.backgroundRotation)
        rotationBox.withLock { $0 = rotation }
        if blocking {
            try await OwnThread.run { database.close() }
        } else {
            await database.close()
        }
        guard case .abandoned = rotation.state else {
            Issue.record("the rotation was not abandoned: \(rotation.state)")
            return
        }
        #expect(Self.descriptors(on: path) == 0)
        #expect(try SQLCipherShell.opens(path, with: .hex(oldHex)))
        let reopened = try EncryptedDatabase(path: path, keys: keys)
        #expect(reopened.report.openedWithKeyID == "old" && reopened.report.rotated)
        #expect(try await reopened.read { db in try db.queryValue("SELECT count(*) FROM t", as: Int.self) } == 20_000)
    }

    /// About 7 MB, in WAL mode: more than the background copy's largest step (4 MiB), so the
    /// first step cannot end the copy.
    static func makeLargeFile(at path: String, key: DatabaseKey) throws {
        let database = try EncryptedDatabase(path: path, keys: try KeyList(database: path, keys: [key]), options: OpenOptions(createIfMissing: true))
        try database.writeWithoutTransaction { db in
            _ = try db.queryValue("PRAGMA journal_mode = WAL", as: String.self)
            try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, note TEXT)")
        }
        try database.write { db in
            for index in 1...20_000 { try db.execute("INSERT INTO t(note) VALUES (?)", ["row \(index) " + String(repeating: "x", count: 300)]) }
        }
    }

    // MARK: probe()

    @Test("probe() reads the schema page on an open connection: ok with the key ids, busy within its limit while another thread holds the writer (no pool), ok with a pool, closed after close()", arguments: [0, 2])
    func probe(readers: Int) async throws {
        let directory = TemporaryDirectory("probe")
        let key = TestKeys.hex()
        let database = try Self.database(readers: readers, key: key, directory)
        let healthy = await database.probe()
        #expect(healthy.status == .ok, "\(healthy)")
        #expect(healthy.isHealthy && healthy.detail == nil)
        #expect(healthy.keyID == "k" && healthy.currentKeyID == "k" && !healthy.needsRotation && !healthy.rotatingInBackground)
        #expect(healthy.path == database.path)
        let holder = WriterHolder(database)
        let held = await database.probe(waitingAtMost: .milliseconds(100))
        await holder.release()
        if readers == 0 {
            #expect(held.status == .busy, "\(held)")
            #expect(held.detail?.contains("no connection was free within 100 ms") == true)
        } else {
            #expect(held.status == .ok, "\(held)")
        }
        let json = String(decoding: try JSONEncoder().encode(held), as: UTF8.self)
        #expect(json.contains("\"keyID\":\"k\""))
        #expect(!json.localizedCaseInsensitiveContains(key))
        await database.close()
        let closed = await database.probe()
        #expect(closed.status == .closed)
    }
}
