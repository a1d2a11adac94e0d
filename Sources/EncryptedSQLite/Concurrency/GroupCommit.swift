import DurableFiles
import Foundation
import SQLCipherConnection

/// One async write waiting for the writer: the caller's closure, and how its caller is resumed.
struct PendingWrite: Sendable {
    /// Runs the caller's closure and keeps its value for `finish`.
    let run: @Sendable (Connection) throws -> Void
    /// Resumes the caller: with the kept value (`nil`), or with the error.
    let finish: @Sendable ((any Error)?) -> Void
}

/// Async writes waiting for the writer. Each write appends itself and queues a drain on the
/// writer queue; a drain takes every write waiting then, so writes that arrive while a commit
/// waits for the disk share the next transaction (group commit, ``OpenOptions/groupCommit``).
final class PendingWrites: Sendable {
    private let list = Locked<[PendingWrite]>([])
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
    /// alone or, with ``OpenOptions/groupCommit``, in one transaction with the other writes waiting then.
    func enqueue<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T, through write: @escaping WriteTransaction) async throws -> T {
        // Checked, as in `run(on:_:)`: ThreadSanitizer does not see the unchecked form's ordering.
        try await withCheckedThrowingContinuation { continuation in
            let box = ValueBox<T>()
            pendingWrites.append(PendingWrite(
                run: { db in box.value = try body(db) },
                finish: { error in
                    if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: box.value!) }
                }))
            queue.async { self.drainWrites(write) }
        }
    }

    /// On the writer queue: runs every write waiting now. One write runs as `write(_:)` runs it;
    /// several share one `IMMEDIATE` transaction, each in a savepoint of its own, and one commit.
    private func drainWrites(_ write: @escaping WriteTransaction) {
        let writes = pendingWrites.takeAll()
        guard !writes.isEmpty else { return }
        guard writes.count > 1, groupCommit else {
            for pending in writes {
                do {
                    try write { db in try pending.run(db) }
                    pending.finish(nil)
                } catch {
                    pending.finish(error)
                }
            }
            return
        }
        runGroup(writes, write)
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
                    queue.async { self.drainWrites(write) }
                }
            } else {
                // BEGIN failed (no closure ran) or COMMIT failed: no closure's changes stand.
                ran = writes.count
                for index in outcomes.indices where outcomes[index] == nil { outcomes[index] = error }
            }
        }
        for index in 0..<ran { writes[index].finish(outcomes[index]) }
    }
}
