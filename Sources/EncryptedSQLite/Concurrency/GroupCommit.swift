import DurableFiles
import Foundation
import SQLCipherConnection

/// One async write waiting for the writer: the caller's closure, and its caller's wait.
struct PendingWrite: Sendable {
    /// Started at most once, on the writer queue; given up by the caller's deadline or cancellation.
    let work: WaitingWork
    /// `true` for a ``WriteSession``: it runs alone, never in a group commit.
    let exclusive: Bool
    /// Runs the caller's closure (after `work.start()`) and keeps its value for the caller.
    let run: @Sendable (Connection) throws -> Void
}

/// Async writes waiting for the writer. Each write appends itself and queues a drain on the
/// writer queue; a drain takes every write waiting then, so writes that arrive while a commit
/// waits for the disk share the next transaction (group commit, ``OpenOptions/groupCommit``).
final class PendingWrites: Sendable {
    private let list = Locked<[PendingWrite]>([])
    /// Async writes (and write transactions) whose callers wait for the writer now, queued or
    /// taken by a drain that waits for the writer's lock (for tests: what a test that holds the
    /// writer waits for, instead of sleeping). Unused by the library.
    let waiting = Locked(0)
    /// How many async writes have stopped waiting so far, started or given up (for tests: only
    /// grows, so a test cannot miss it the way it can miss a moment of ``waiting``). Unused by
    /// the library.
    let leftWaiting = Locked(0)
    /// The most writes one transaction has run so far (for tests).
    let largestGroup = Locked(0)

    func append(_ write: PendingWrite) { list.withLock { $0.append(write) } }

    /// How many writes wait now (for tests: a test that holds the writer waits until this many
    /// writes are queued behind it, instead of sleeping). Unused by the library.
    var count: Int { list.withLock { $0.count } }

    /// Every write waiting now, oldest first (none when an earlier drain took them).
    func takeAll() -> [PendingWrite] {
        list.withLock { list in
            defer { list.removeAll(keepingCapacity: true) }
            return list
        }
    }

    /// Puts writes that have not run back at the front, for the next drain.
    func putBack(_ writes: [PendingWrite]) { list.withLock { $0.insert(contentsOf: writes, at: 0) } }
}

/// The value of one caller's closure between its run and its caller's resumption; written and
/// read on the writer queue's thread only (the queue orders the accesses).
private final class ValueBox<T>: @unchecked Sendable {
    var value: T?
}

/// The database's own write: runs its argument in an `IMMEDIATE` transaction on the writer, one
/// caller at a time, following a rotation made elsewhere (`EncryptedDatabase.write(_:)`).
typealias WriteTransaction = @Sendable (_ body: (Connection) throws -> Void) throws -> Void

extension SerializedWriter {

    /// The async `write(_:)`: queues the closure for the writer queue, where it runs through `write`
    /// alone or, with ``OpenOptions/groupCommit``, in one transaction with the other writes waiting
    /// then. The caller stops waiting when `limit` passes or its task is cancelled before the
    /// closure starts; the closure then never runs.
    func enqueue<T: Sendable>(
        limit: Duration?, path: String, _ body: @escaping @Sendable (Connection) throws -> T, through write: @escaping WriteTransaction
    ) async throws -> T {
        let box = ValueBox<T>()
        try await WaitingWork.wait(limit: limit, expired: EncryptedDatabaseError.writerWaitExpired(path: path, waited: limit ?? .zero)) { work in
            submit(PendingWrite(work: work, exclusive: false, run: { db in box.value = try body(db) }), through: write)
        }
        return box.value!
    }

    /// Queues `pending` for the writer queue.
    func submit(_ pending: PendingWrite, through write: @escaping WriteTransaction) {
        let waiting = pendingWrites.waiting, leftWaiting = pendingWrites.leftWaiting
        waiting.withLock { $0 += 1 }
        pending.work.whenLeavingWait {
            waiting.withLock { $0 -= 1 }
            leftWaiting.withLock { $0 += 1 }
        }
        pendingWrites.append(pending)
        executor.async { self.drainWrites(write) }
    }

    /// On the writer queue: runs every write waiting now that its caller still waits for. One
    /// write runs as `write(_:)` runs it; several share one `IMMEDIATE` transaction, each in a
    /// savepoint of its own, and one commit. A ``WriteSession`` runs alone.
    private func drainWrites(_ write: @escaping WriteTransaction) {
        let writes = pendingWrites.takeAll().filter { !$0.work.wasGivenUp }
        var batch: [PendingWrite] = []
        for pending in writes {
            if pending.exclusive {
                runBatch(batch, write)
                batch = []
                runAlone(pending, write)
            } else {
                batch.append(pending)
            }
        }
        runBatch(batch, write)
    }

    private func runBatch(_ writes: [PendingWrite], _ write: @escaping WriteTransaction) {
        if writes.count > 1, groupCommit {
            runGroup(writes, write)
        } else {
            for pending in writes { runAlone(pending, write) }
        }
    }

    /// Runs one write in a transaction of its own. A write given up while `BEGIN` waited for
    /// another process's lock does not run, and its empty transaction commits.
    private func runAlone(_ pending: PendingWrite, _ write: @escaping WriteTransaction) {
        do {
            try write { db in
                guard pending.work.start() else { return }
                try pending.run(db)
            }
            pending.work.end(nil)
        } catch {
            pending.work.end(error)
        }
    }

    /// Runs `writes` in one transaction. Each closure runs once, in a savepoint: when it throws,
    /// only its own changes are rolled back and only its caller gets the error. A closure whose
    /// deferred foreign keys are left violated is rolled back and gets the error its own commit
    /// would have given. The others' callers resume after the commit: with their values, or
    /// with the commit's error. When SQLite ends the whole transaction during a closure (disk
    /// full, I/O error), the closures that ran before it get that error, and the ones that have
    /// not run yet go back to wait for the next drain.
    private func runGroup(_ writes: [PendingWrite], _ write: @escaping WriteTransaction) {
        pendingWrites.largestGroup.withLock { $0 = max($0, writes.count) }
        var outcomes = [(any Error)?](repeating: nil, count: writes.count)
        var ran = 0
        var aborted: (index: Int, error: any Error)?
        do {
            try write { db in
                for (index, pending) in writes.enumerated() {
                    ran = index + 1
                    guard pending.work.start() else { continue }
                    do {
                        try db.savepoint { db in
                            try pending.run(db)
                            if db.hasDeferredForeignKeyViolations { throw SQLiteError.deferredForeignKeyViolation }
                        }
                    } catch {
                        outcomes[index] = error
                        if !db.isInTransaction {
                            aborted = (index, error)
                            throw error
                        }
                    }
                }
            }
        } catch {
            if let aborted {
                for index in 0..<aborted.index where outcomes[index] == nil { outcomes[index] = aborted.error }
                // The closures after the one that ended the transaction never ran.
                let notRun = Array(writes[(aborted.index + 1)...])
                if !notRun.isEmpty {
                    pendingWrites.putBack(notRun)
                    executor.async { self.drainWrites(write) }
                }
            } else {
                // BEGIN failed (no closure ran) or COMMIT failed: no closure's changes stand.
                ran = writes.count
                for index in outcomes.indices where outcomes[index] == nil { outcomes[index] = error }
            }
        }
        // A write given up before it started was resumed then: `end` leaves it alone.
        for index in 0..<ran { writes[index].work.end(outcomes[index]) }
    }
}
