import Foundation

/// The thread of a database's writer, as a task executor: a task that prefers it runs where the
/// writer connection lives, so its awaited writes start and resume without a hand-over between
/// threads.
///
/// An async `write` from a task on Swift's global executor is two hand-overs: to the writer's
/// thread, and back to a thread of the cooperative pool once the commit is on disk. While other
/// tasks keep the pool's threads busy (readers, request handlers), the way back waits for a turn.
/// A task that mostly writes (an ingest loop, a queue consumer) can run on the writer's thread
/// instead:
///
/// ```swift
/// let ingest = Task(executorPreference: database.writerExecutor) {
///     for await event in events {
///         try await database.write { db in
///             try db.execute("INSERT INTO events(body) VALUES (?)", [event.body])
///         }
///     }
/// }
/// ```
///
/// Its writes still go through the queue every async write takes: they share group commits with
/// other tasks' writes, and a write whose wait limit passes (or whose task is cancelled) before
/// it started never runs. But while a rotation or another thread holds the writer, the writer's
/// thread waits for it, and so does every task on this executor: such a task learns that its
/// limit passed only once the writer is free. Request handlers that must answer within a
/// deadline stay on the global executor. What a task here does between writes runs on the
/// writer's thread and delays every other task's writes, so keep CPU-heavy work and long reads
/// elsewhere. A
/// ``EncryptedDatabase/writeTransaction(waitingAtMost:_:)`` called there runs its body on the
/// global executor (the writer's thread serves the session). Blocking the writer's thread is
/// allowed (it is not a thread of the cooperative pool): that is what a commit's `fsync` does.
public final class WriterExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: `queue` is thread-safe and never replaced.
    private let queue: DispatchQueue
    /// The executor whose queue's work (``async(_:)``) the current thread runs, as a
    /// thread-specific value; the work holds the executor, so the address names it. Not a
    /// queue-specific one (`DispatchQueue.setSpecific`): libdispatch releases a queue's specific
    /// values on one of its worker threads when the queue goes, which woke a thread at every
    /// database's close.
    private static let running: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create failed")
        return key
    }()

    init(queue: DispatchQueue) {
        self.queue = queue
    }

    /// Runs `job` on the writer's queue, after the work queued there before it.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        async { job.runSynchronously(on: executor) }
    }

    /// Runs `work` on the writer's queue, after the work queued there before it, with
    /// ``isCurrent`` `true` while it runs. Every piece of work the library queues there (async
    /// writes and their group commits, reads without a pool, the probe, close's barrier, and the
    /// jobs of tasks on this executor) goes through here.
    func async(_ work: @escaping @Sendable () -> Void) {
        queue.async { [self] in
            let outer = pthread_getspecific(Self.running)
            pthread_setspecific(Self.running, Unmanaged.passUnretained(self).toOpaque())
            defer { pthread_setspecific(Self.running, outer) }
            work()
        }
    }

    /// `true` when the calling code runs on the writer's queue (a task on this executor, or the
    /// library's own work there, queued through ``async(_:)``).
    var isCurrent: Bool { pthread_getspecific(Self.running) == Unmanaged.passUnretained(self).toOpaque() }
}
