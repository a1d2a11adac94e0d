import DurableFiles
@testable import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// Dispatch's global queues start about one thread per core and add one about every second while
/// they stay blocked; other code of the process (another database's reads, a library, a test)
/// may block them at any time. The library's deadlines and waiting work must not depend on them:
/// in a loaded CI run, a 300 ms wait limit took 30 s and queued reads never ran.
@Suite("Blocked Dispatch threads: the library's deadlines and queued work do not wait for the global queues")
struct BlockedDispatchTests {
    /// Blocks `count` items of Dispatch's global queue until ``release()``, or until its hang guard
    /// lets them go (which ``release()`` reports: the test then took its order from the guard).
    final class GlobalQueueBlocker: Sendable {
        private let unblock = DispatchSemaphore(value: 0)
        private let count: Int
        private let guardFired = Locked(false)
        private let released = Locked(false)

        init(count: Int, guardAfter limit: DispatchTimeInterval) {
            self.count = count
            let unblock = self.unblock
            for _ in 0..<count { DispatchQueue.global().async { unblock.wait() } }
            let guardFired = self.guardFired, released = self.released
            let guardThread = Thread { [count] in
                let nap = DispatchSemaphore(value: 0)
                _ = nap.wait(timeout: .now() + limit)
                let fire = released.withLock { released in
                    defer { released = true }
                    return !released
                }
                guard fire else { return }
                guardFired.withLock { $0 = true }
                for _ in 0..<count { unblock.signal() }
            }
            guardThread.start()
        }

        var fired: Bool { guardFired.withLock { $0 } }

        /// Unblocks every item; `true` when the hang guard had done it first.
        func release() -> Bool {
            let first = released.withLock { released in
                defer { released = true }
                return !released
            }
            if first { for _ in 0..<count { unblock.signal() } }
            return guardFired.withLock { $0 }
        }
    }

    /// The test's own tasks run on a serial queue: on Linux, Swift's global executor is the global
    /// Dispatch queue this test blocks.
    static let executor = SerialQueueExecutor()

    /// More blocked items than the global queue's threads for the whole test, by a margin of
    /// tens of seconds at one new thread a second.
    static let blockedItems = ProcessInfo.processInfo.activeProcessorCount + 40

    @Test("while every global Dispatch thread is blocked: a write's wait limit expires, a pooled read that waits for a reader runs once one is free, and close() returns")
    func deadlinesAndQueuedWork() async throws {
        try await withTaskExecutorPreference(Self.executor) { try await Self.deadlinesAndQueuedWork() }
    }

    private static func deadlinesAndQueuedWork() async throws {
        let directory = TemporaryDirectory("blocked-dispatch")
        let database = try ServiceAPITests.database(readers: 1, limit: .milliseconds(100), directory)
        try await database.write { db in try db.execute("INSERT INTO t(note) VALUES ('kept')") }
        let blocker = GlobalQueueBlocker(count: Self.blockedItems, guardAfter: .seconds(20))
        defer { _ = blocker.release() }

        // 1. A deadline: the writer is held on another thread; the write gives up after its limit.
        let holder = ServiceAPITests.WriterHolder(database)
        let runs = ServiceAPITests.Runs()
        await #expect(throws: EncryptedDatabaseError.writerWaitExpired(path: database.path, waited: .milliseconds(100))) {
            try await database.write { db in
                runs.ran()
                try db.execute("INSERT INTO t(note) VALUES ('never')")
            }
        }
        #expect(!blocker.fired, "the write's 100 ms limit expired only once the blocked global threads were let go")
        await holder.release()

        // 2. Queued work: the only reader is held, so an async read waits on a thread for it.
        let pool = try #require(database.readers)
        let readerHeld = DispatchSemaphore(value: 0), letReaderGo = DispatchSemaphore(value: 0)
        Thread {
            _ = try? database.read { _ in
                readerHeld.signal()
                _ = letReaderGo.wait(timeout: .now() + 300)   // a hang guard only
            }
        }.start()
        readerHeld.wait()
        let read = Task(executorPreference: Self.executor) { try await ServiceAPITests.notes(database) }
        // The read waits inside the pool (it got a thread), or the guard let the global queue go.
        while pool.waitingCount == 0 && !blocker.fired { await Task.yield() }
        #expect(!blocker.fired, "the queued read got no thread until the blocked global threads were let go")
        letReaderGo.signal()
        #expect(try await read.value == ["kept"])

        // 3. close() drains that work and returns; later calls throw closed.
        await database.close()
        #expect(!blocker.release(), "close() or the read returned only once the blocked global threads were let go")
        await #expect(throws: EncryptedDatabaseError.closed(path: database.path)) { try await ServiceAPITests.notes(database) }
        #expect(runs.value == 0)
    }
}

/// The trait that keeps blocking tests off the cooperative pool does move them.
@Suite("TestSupport's ownThread trait", .ownThread)
struct OwnThreadTraitTests {
    @Test("a synchronous test of a suite with .ownThread runs on a serial queue of its own, not on a global queue")
    func runsOnItsOwnQueue() {
        #expect(DispatchQueue.getSpecific(key: SerialQueueExecutor.key) == true)
    }

    @Test("OwnThread.started runs its work while every thread of the cooperative pool is blocked, and value() returns it")
    func startedWhilePoolBlocked() async throws {
        let blocker = BlockedDispatchTests.GlobalQueueBlocker(count: BlockedDispatchTests.blockedItems, guardAfter: .seconds(120))
        let ran = DispatchSemaphore(value: 0)
        let work = OwnThread.started { () -> Int in
            ran.signal()
            return 7
        }
        // A hang guard only: the work signals as soon as its thread runs. Work started from a Task
        // would wait for the pool: one more thread about every second, after the blocker's 40 and more.
        let signalled = ran.wait(timeout: .now() + 20) == .success
        #expect(!blocker.release(), "the blocker's hang guard let the pool go first")
        #expect(signalled, "the work did not start while the pool was blocked")
        #expect(try await work.value() == 7)
    }
}
