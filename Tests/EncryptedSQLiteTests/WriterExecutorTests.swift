import DurableFiles
@testable import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// `EncryptedDatabase.writerExecutor`: a task that prefers it runs on the writer's queue, and the
/// async API keeps its rules there (group commit, one transaction per session, close).
///
/// Orders come from the writer's serial queue: work queued behind a blocker the test holds runs
/// in the order it was queued once the test lets the blocker go.
@Suite("The writer's executor: tasks that run where the writer connection lives")
struct WriterExecutorTests {
    /// Holds the writer's queue (not its lock) until ``release()``: what is queued meanwhile waits.
    final class QueueBlocker: Sendable {
        private let gate = DispatchSemaphore(value: 0)

        init(_ database: EncryptedDatabase) {
            let gate = self.gate
            // A hang guard only: the test releases the queue long before.
            database.writer.queue.async { _ = gate.wait(timeout: .now() + 600) }
        }

        func release() { gate.signal() }
    }

    /// Waits on a thread of its own, at most `limit` (a hang guard), for `done`. 900 s, as
    /// `ServiceAPITests.WriterHolder`'s guard: in a full run on a loaded machine the cooperative
    /// pool, where these tasks' global-executor parts run, was starved past 120 s.
    static func finished(_ done: DispatchSemaphore, limit: Int = 900) async throws -> Bool {
        try await OwnThread.run { done.wait(timeout: .now() + .seconds(limit)) == .success }
    }

    @Test("a task on writerExecutor runs on the writer's queue before, inside and after its awaited write, which commits")
    func taskRunsOnTheWritersQueue() async throws {
        let directory = TemporaryDirectory("writer-executor")
        let database = try ServiceAPITests.database(readers: 2, directory)
        let onQueue = try await Task(executorPreference: database.writerExecutor) {
            let before = database.writer.executor.isCurrent
            let inside = try await database.write { db in
                try db.execute("INSERT INTO t(note) VALUES ('on the writer')")
                return database.writer.executor.isCurrent
            }
            let after = database.writer.executor.isCurrent
            return [before, inside, after]
        }.value
        #expect(onQueue == [true, true, true])
        // Control: a task on the global executor is not on the writer's queue, its write is.
        let elsewhere = try await Task {
            let inside = try await database.write { _ in database.writer.executor.isCurrent }
            return [database.writer.executor.isCurrent, inside]
        }.value
        #expect(elsewhere == [false, true])
        #expect(try await ServiceAPITests.notes(database) == ["on the writer"])
    }

    @Test("writes of 8 tasks on writerExecutor, queued together, share one transaction; each gets its value, and a closure that throws loses only its own row")
    func groupCommitOnTheExecutor() async throws {
        let directory = TemporaryDirectory("writer-executor")
        let database = try ServiceAPITests.database(directory)
        struct Refused: Error, Equatable { let id: Int }
        let blocker = QueueBlocker(database)
        // Each task's first job is queued behind the blocker at its creation.
        let tasks = (0..<8).map { id in
            Task(executorPreference: database.writerExecutor) { () -> Result<Int, Refused> in
                do {
                    return .success(try await database.write { db in
                        try db.execute("INSERT INTO t(note) VALUES (?)", ["row \(id)"])
                        if id == 5 { throw Refused(id: id) }
                        return id * 10
                    })
                } catch let error as Refused {
                    return .failure(error)
                } catch {
                    Issue.record("write \(id) threw \(error)")
                    return .failure(Refused(id: -1))
                }
            }
        }
        blocker.release()
        var results: [Result<Int, Refused>] = []
        for task in tasks { results.append(await task.value) }
        #expect(results == (0..<8).map { $0 == 5 ? .failure(Refused(id: 5)) : .success($0 * 10) })
        #expect(database.writer.pendingWrites.largestGroup.withLock { $0 } == 8)
        #expect(try await ServiceAPITests.notes(database) == (0..<8).filter { $0 != 5 }.map { "row \($0)" })
    }

    @Test("while another thread holds the writer, a write with a limit from a task on writerExecutor never runs; the task gets writerWaitExpired once the writer is free")
    func limitWhileTheWriterIsHeld() async throws {
        let directory = TemporaryDirectory("writer-executor")
        let database = try ServiceAPITests.database(directory)
        let holder = ServiceAPITests.WriterHolder(database)
        let runs = ServiceAPITests.Runs()
        let task = Task(executorPreference: database.writerExecutor) {
            try await database.write(waitingAtMost: .milliseconds(100)) { db in
                runs.ran()
                try db.execute("INSERT INTO t(note) VALUES ('never')")
            }
        }
        // The write waits, then its limit gives it up while the writer stays held (it cannot have
        // started): it has left its wait.
        await ServiceAPITests.until { database.writer.pendingWrites.leftWaiting.withLock { $0 } == 1 }
        await holder.release()
        await #expect(throws: EncryptedDatabaseError.writerWaitExpired(path: database.path, waited: .milliseconds(100))) {
            try await task.value
        }
        #expect(runs.value == 0)
        try await database.write { db in try db.execute("INSERT INTO t(note) VALUES ('after')") }
        #expect(try await ServiceAPITests.notes(database) == ["after"])
    }

    @Test("writeTransaction from a task on writerExecutor runs its body off the writer's thread, which serves the session, and commits")
    func writeTransactionOnTheExecutor() async throws {
        let directory = TemporaryDirectory("writer-executor")
        let database = try ServiceAPITests.database(directory)
        let done = DispatchSemaphore(value: 0)
        let outcome = Locked<Result<[Bool], any Error>?>(nil)
        Task(executorPreference: database.writerExecutor) {
            do {
                let inBody = try await database.writeTransaction { session in
                    let bodyOnWriter = database.writer.executor.isCurrent
                    try await session.run { db in try db.execute("INSERT INTO t(note) VALUES ('in the session')") }
                    return bodyOnWriter
                }
                let afterwards = database.writer.executor.isCurrent
                outcome.withLock { $0 = .success([inBody, afterwards]) }
            } catch {
                outcome.withLock { $0 = .failure(error) }
            }
            done.signal()
        }
        // Without the move off the writer's thread this never ends: the guard records it.
        let ended = try await Self.finished(done)
        #expect(ended, "writeTransaction on the writer's executor never ended (a deadlock)")
        guard ended else { return }
        #expect(try outcome.withLock { $0 }?.get() == [false, true])
        #expect(try await ServiceAPITests.notes(database) == ["in the session"])
    }

    @Test("the blocking close() called from a task on writerExecutor returns and closes the database")
    func blockingCloseOnTheExecutor() async throws {
        let directory = TemporaryDirectory("writer-executor")
        let database = try ServiceAPITests.database(directory)
        try await database.write { db in try db.execute("INSERT INTO t(note) VALUES ('kept')") }
        let done = DispatchSemaphore(value: 0)
        Task(executorPreference: database.writerExecutor) {
            // Synchronous code reached from the task (close() is unavailable in async code itself).
            let close: () -> Void = { database.close() }
            close()
            done.signal()
        }
        #expect(try await Self.finished(done), "close() on the writer's queue never returned")
        #expect(throws: EncryptedDatabaseError.closed(path: database.path)) { try database.read { _ in } }
    }
}
