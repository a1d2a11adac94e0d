import DurableFiles
import Foundation
import SQLCipherConnection

extension EncryptedDatabase {
    /// `read(_:)` for Swift concurrency.
    ///
    /// With a reader pool, when a reader is free the read runs at once on the calling task's
    /// thread: a pooled read waits for nothing (not for the writer, in WAL mode), so it is the
    /// work of its statements only, without two thread hand-overs that cost about ten times a
    /// primary-key lookup. When every reader is in use, while a rotation has the pool, or without
    /// a pool (the read then shares the writer), it runs on a thread of the database's own (never
    /// on Dispatch's global queues, which on Linux are the cooperative pool) and the task waits
    /// suspended, so no thread of the cooperative pool waits.
    /// A read run in the task suspends it (`Task.yield()`) once its thread has run such reads
    /// for 50 µs without a suspension: a loop of reads leaves room for the other tasks of its
    /// thread, without a trip through the executor after every short read.
    ///
    /// ```swift
    /// let count = try await database.read { db in
    ///     try db.queryValue("SELECT count(*) FROM notes", as: Int.self)
    /// }
    /// ```
    /// - Throws: as `read(_:)`.
    public func read<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try checkOpen()
        if readers == nil { checkNotHoldingWriter("read") }
        if let readers, case .read(let value) = try readOnFreeReader(readers, body) {
            // A loop of reads lets the other tasks of its thread run (ReadPacing).
            if ReadPacing.readEnded() { await Task.yield() }
            return value
        }
        if readers == nil {
            return try await runWaiting(on: .writer(writer.executor), limit: follower.options.writerWaitLimit) { waiting in
                try self.performRead { db in
                    try waiting.mustStart()
                    return try body(db)
                }
            }
        }
        return try await run(on: queue) { try self.performRead(body) }
    }

    /// `write(_:)` for Swift concurrency: waits for the writer at most
    /// ``OpenOptions/writerWaitLimit`` (no limit by default).
    ///
    /// The task waits suspended; no thread of the cooperative pool waits. A task that mostly
    /// writes may run on ``writerExecutor`` instead, where its writes need no hand-over between
    /// threads. When the task is
    /// cancelled, or the limit passes, before `body` started, the call throws at once and `body`
    /// never runs; once `body` started, it runs to its commit.
    /// - Throws: as `write(_:)`; ``EncryptedDatabaseError/writerWaitExpired(path:waited:)`` when
    ///   the limit passed first; `CancellationError` when the task was cancelled first;
    ///   ``EncryptedDatabaseError/closed(path:)`` after ``close()``.
    public func write<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try await write(waitingAtMost: follower.options.writerWaitLimit, body)
    }

    /// `write(_:)` for Swift concurrency, waiting for the writer at most `limit` (`nil`: no limit):
    /// for a request handler that must answer within its own deadline, while a rotation, a
    /// migration or a long transaction holds the writer.
    ///
    /// ```swift
    /// do {
    ///     try await database.write(waitingAtMost: .seconds(2)) { db in
    ///         try db.execute("INSERT INTO notes(text) VALUES (?)", [text])
    ///     }
    /// } catch EncryptedDatabaseError.writerWaitExpired {
    ///     // 503: nothing was written; the client may retry
    /// }
    /// ```
    /// - Throws: as ``write(_:)-(@Sendable(Connection)->T)``.
    public func write<T: Sendable>(waitingAtMost limit: Duration?, _ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try checkOpen()
        checkNotHoldingWriter("write")
        return try await writer.enqueue(limit: limit, path: path, body, through: { work in try self.performWrite(work) })
    }

    /// `writeWithoutTransaction(_:)` for Swift concurrency, waiting for the writer at most
    /// ``OpenOptions/writerWaitLimit``, as the async `write` does.
    /// - Throws: as `writeWithoutTransaction(_:)`, and as the async `write`.
    public func writeWithoutTransaction<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try checkOpen()
        checkNotHoldingWriter("writeWithoutTransaction")
        return try await runWaiting(on: .writer(writer.executor), limit: follower.options.writerWaitLimit) { waiting in
            try self.performWriteWithoutTransaction { db in
                try waiting.mustStart()
                return try body(db)
            }
        }
    }

    /// Where ``runWaiting(on:limit:_:)`` runs its access: the writer's serial queue, or a thread of
    /// the database's blocking work (a pooled read).
    enum WorkQueue {
        case writer(WriterExecutor)
        case blocking(BlockingWork)

        func async(_ work: @escaping @Sendable () -> Void) {
            switch self {
            case .writer(let executor): executor.async(work)
            case .blocking(let blocking): blocking.async(work)
            }
        }
    }

    /// Runs `access` on `queue`, waiting for its connection at most `limit` or until the task is
    /// cancelled. `access` calls `mustStart()` once it holds its connection (inside the access's
    /// closure), so the wait covers the writer's lock too (a rotation on another thread holds
    /// it); the caller's closure never runs when the wait ended first.
    func runWaiting<T: Sendable>(on queue: WorkQueue, limit: Duration?, _ access: @escaping @Sendable (WaitingWork) throws -> T) async throws -> T {
        let box = Locked<T?>(nil)
        try await WaitingWork.wait(limit: limit, expired: EncryptedDatabaseError.writerWaitExpired(path: self.path, waited: limit ?? .zero)) { waiting in
            queue.async {
                guard !waiting.wasGivenUp else { return }
                do {
                    let value = try access(waiting)
                    box.withLock { $0 = value }
                    waiting.end(nil)
                } catch {
                    waiting.end(error)
                }
            }
        }
        return box.withLock { $0 }!
    }

    /// Holds the writer for an async `body`: every ``WriteSession/run(_:)`` of the session runs on
    /// the writer connection, in one `IMMEDIATE` transaction that commits when `body` returns and
    /// rolls back when it throws. Between them `body` may await other work while the writer stays
    /// held. This is the transaction of a framework whose transaction closure is async (Fluent's
    /// `transaction`).
    ///
    /// ```swift
    /// try await database.writeTransaction(waitingAtMost: .seconds(2)) { session in
    ///     let balance = try await session.run { db in
    ///         try db.queryValue("SELECT balance FROM accounts WHERE id = ?", [id], as: Int.self)
    ///     }
    ///     guard balance >= amount else { throw TransferError.insufficient }   // rolls back
    ///     try await session.run { db in try db.execute("UPDATE accounts SET balance = balance - ? WHERE id = ?", [amount, id]) }
    /// }
    /// ```
    ///
    /// Inside `body`, use the session, not this database's `write` (that would wait for the writer
    /// the body holds: it stops the program with a message instead). Pooled reads do not see the
    /// session's uncommitted changes. The transaction follows a rotation made by another process
    /// that its `BEGIN` finds, as `write(_:)` does.
    /// - Parameter limit: how long to wait for the writer before `body` starts (`nil`:
    ///   ``OpenOptions/writerWaitLimit``).
    /// - Throws: whatever `body` throws (after the rollback); the commit's `SQLiteError`;
    ///   ``EncryptedDatabaseError/writerWaitExpired(path:waited:)`` or `CancellationError` when
    ///   `body` never started; ``EncryptedDatabaseError/closed(path:)`` after ``close()``.
    public func writeTransaction<T: Sendable>(waitingAtMost limit: Duration? = nil, _ body: (WriteSession) async throws -> T) async throws -> T {
        try checkOpen()
        checkNotHoldingWriter("writeTransaction")
        if writer.executor.isCurrent {
            // The writer's thread serves the session until the body ends: a body (or the wait
            // for the session's start) scheduled on that thread would never run.
            return try await withTaskExecutorPreference(globalConcurrentExecutor) {
                try await writeTransaction(waitingAtMost: limit, body)
            }
        }
        let limit = limit ?? follower.options.writerWaitLimit
        let session = WriteSession(path: path)
        let holder = Locked<WaitingWork?>(nil)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (started: CheckedContinuation<Void, any Error>) in
                session.awaitStart(started)
                let work = WaitingWork { error in session.holderEnded(error) }
                holder.withLock { $0 = work }
                if Task.isCancelled {
                    work.giveUp(CancellationError())
                    return
                }
                work.giveUp(after: limit, with: EncryptedDatabaseError.writerWaitExpired(path: self.path, waited: limit ?? .zero))
                writer.submit(PendingWrite(work: work, exclusive: true, run: { db in try session.serve(db) }), through: { work in try self.performWrite(work) })
            }
        } onCancel: {
            holder.withLock { $0 }?.giveUp(CancellationError())
        }
        let value: T
        do {
            value = try await WriteSession.$held.withValue(WriteSession.held + [WriteSession.Holder(database: ObjectIdentifier(self), task: WriteSession.currentTask)]) { try await body(session) }
        } catch {
            // The rollback's own outcome adds nothing to the body's error.
            try? await session.end(commit: false)
            throw error
        }
        try await session.end(commit: true)
        return value
    }

    /// Stops the program when the task of this database's ``writeTransaction(waitingAtMost:_:)``
    /// body calls an access that would wait for the writer that body holds (a deadlock). Tasks the
    /// body creates are not stopped: awaiting their write from the body still deadlocks, until
    /// ``OpenOptions/writerWaitLimit`` ends it.
    func checkNotHoldingWriter(_ method: String) {
        precondition(!WriteSession.held.contains(WriteSession.Holder(database: ObjectIdentifier(self), task: WriteSession.currentTask)), """
            EncryptedDatabase.\(method) was called inside this database's writeTransaction body, which holds the \
            writer: it would wait forever. Use the body's WriteSession (session.run) instead.
            """)
    }

    /// The continuation is resumed exactly once, by the queued work. It is the checked form: with
    /// the unchecked one, ThreadSanitizer reports the resumption and the task's own frame as a data
    /// race (it does not see the runtime's ordering between them), and the CI's ThreadSanitizer
    /// phase must stay clean.
    private func run<T: Sendable>(on queue: BlockingWork, _ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try work() }) }
        }
    }
}
