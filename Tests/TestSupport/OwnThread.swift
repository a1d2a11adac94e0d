import Foundation

/// Runs blocking work on a thread of its own and awaits its end, so that no thread of the
/// cooperative pool waits for it.
///
/// The pool has one thread per core: on a 2-core machine, two tests that block a pool thread
/// each while waiting for a task (a rotation's `result()`) keep that task, and every other task
/// of the test process, from running. Work that waits for async work, or that blocks for long
/// (pause-point rounds), goes here. Its issues are not recorded from the thread (it has no
/// current test): the work returns what it found and the caller expects.
///
/// ```swift
/// let summary = try await OwnThread.run { try Self.everyPausePoint(walMode: true, blobs: 50) }
/// #expect(summary.problems.isEmpty)
/// ```
public enum OwnThread {
    /// Runs `work` on a new thread; returns its value or throws its error.
    public static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try work() }) }.start()
        }
    }

    /// Starts `work` on a new thread and returns at once: for a test's own blocking helper (a
    /// read held open), which must not take a thread of the global Dispatch queue. On Linux that
    /// queue is the cooperative pool: blocked there, it delayed the tests' own tasks by tens of
    /// seconds in loaded CI runs.
    public static func start(_ work: @escaping @Sendable () -> Void) {
        Thread { work() }.start()
    }

    /// Starts `work` on a new thread at once and returns a handle to await its value: for work
    /// that must be running before the test goes on (a rotation a pause will stop). A `Task`
    /// that calls ``run(_:)`` starts only when a thread of the cooperative pool is free, which
    /// in a loaded run took longer than a test's hang guard.
    ///
    /// ```swift
    /// let rotation = OwnThread.started { try database.rotateToCurrentKey() }
    /// … 
    /// let report = try await rotation.value()
    /// ```
    public static func started<T: Sendable>(_ work: @escaping @Sendable () throws -> T) -> Started<T> {
        let handle = Started<T>()
        Thread { handle.finish(Result { try work() }) }.start()
        return handle
    }

    /// The value of work begun by ``started(_:)``.
    public final class Started<T: Sendable>: @unchecked Sendable {
        private let lock = NSLock()
        // Invariant: only touched with `lock` held; `waiter` is resumed once, by whichever of
        // `finish` and `value` comes second.
        private var result: Result<T, any Error>?
        private var waiter: CheckedContinuation<T, any Error>?

        fileprivate init() {}

        fileprivate func finish(_ outcome: Result<T, any Error>) {
            let waiting = lock.withLock { () -> CheckedContinuation<T, any Error>? in
                result = outcome
                defer { waiter = nil }
                return waiter
            }
            waiting?.resume(with: outcome)
        }

        /// Waits (suspended) for the work's end; returns its value or throws its error. Call once.
        public func value() async throws -> T {
            try await withCheckedThrowingContinuation { continuation in
                let done = lock.withLock { () -> Result<T, any Error>? in
                    if result == nil { waiter = continuation }
                    return result
                }
                if let done { continuation.resume(with: done) }
            }
        }
    }

    /// Runs `work(0)` … `work(count - 1)` at once, each on a thread of its own, and waits for them
    /// all; returns their values in lane order, or throws the first lane's error. For a test whose
    /// trials are independent and each mostly waits on one process (a kill trial): lanes shorten
    /// the suite's longest chain instead of leaving a core idle at its end. The caller blocks, so
    /// it must run on a thread of its own (a suite with `.ownThread`).
    public static func lanes<T: Sendable>(_ count: Int, _ work: @escaping @Sendable (Int) throws -> T) throws -> [T] {
        let results = LaneResults<T>(count: count)
        let group = DispatchGroup()
        for lane in 0..<count {
            group.enter()
            Thread {
                results.set(lane, Result { try work(lane) })
                group.leave()
            }.start()
        }
        group.wait()
        return try results.values()
    }

    private final class LaneResults<T: Sendable>: @unchecked Sendable {
        private let lock = NSLock()
        // Invariant: only touched with `lock` held.
        private var results: [Result<T, any Error>?]

        init(count: Int) { results = Array(repeating: nil, count: count) }
        func set(_ lane: Int, _ result: Result<T, any Error>) { lock.withLock { results[lane] = result } }
        func values() throws -> [T] { try lock.withLock { results }.map { try $0!.get() } }
    }
}
