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
}
