import Dispatch
import Testing

/// Runs each test of a suite (or one test) on a thread of its own instead of the cooperative pool.
///
/// On Linux the cooperative pool is Dispatch's global queue: about one thread per core, plus about
/// one more a second while they stay blocked. Swift Testing runs a synchronous test on a pool
/// thread for its whole length, so a few tests that wait for processes (crash trials, `rekey`
/// runs, services) keep every async test of the process from running: in loaded CI runs, async
/// tests waited minutes to take a step, and a task a test waited for did not start within 60 s.
/// Suites whose tests block for long carry this trait; their tests then leave the pool to the rest.
///
/// ```swift
/// @Suite("kill -9 during migrations", .ownThread)
/// struct MigrationKillTests { … }
/// ```
public struct OwnThreadTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        // The suite's own scope runs as usual; each test case gets a thread.
        guard testCase != nil else { return try await function() }
        try await withTaskExecutorPreference(SerialQueueExecutor()) { try await function() }
    }
}

extension Trait where Self == OwnThreadTrait {
    /// Runs each test on a thread of its own (``OwnThreadTrait``).
    public static var ownThread: Self { OwnThreadTrait() }
}

/// A task executor that runs its jobs, one at a time, on a serial Dispatch queue: serial queues
/// take their threads from Dispatch's overcommitting pool, which starts one for work that finds
/// none free, never from the rationed global queue.
public final class SerialQueueExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: the queue is thread-safe and never replaced.
    private let queue = DispatchQueue(label: "TestSupport.SerialQueueExecutor")

    /// Set on every such queue: `DispatchQueue.getSpecific(key:)` tells a job that it runs on one.
    public static let key = DispatchSpecificKey<Bool>()

    public init() {
        queue.setSpecific(key: Self.key, value: true)
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}
