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
}
