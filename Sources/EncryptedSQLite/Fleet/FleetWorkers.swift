import DurableFiles
import Foundation

/// The worker pool of a fleet run, shared by ``FleetRotation`` and ``FleetInspection``: one job
/// per database on at most `jobs` threads, each outcome reported as it finishes (one report at a
/// time), and all outcomes returned in the order of the databases, once every worker thread has
/// ended.
struct FleetWorkers {
    /// The database paths, in the order their outcomes are returned.
    let paths: [String]
    /// How many threads work at once (at least 1, at most one per database).
    let jobs: Int

    /// Runs `work` once per database, with its index and size before the run.
    /// - Parameters:
    ///   - isFailure: Whether an outcome counts as failed in ``FleetProgress/failed``.
    ///   - work: One database's job.
    ///   - progress: Called after each database, one call at a time, from the worker threads.
    /// - Returns: The outcomes in database order, the run's duration and how many threads ran.
    func run<Outcome: Sendable>(
        isFailure: @escaping @Sendable (Outcome) -> Bool,
        work: @escaping @Sendable (_ index: Int, _ bytes: Int64) -> Outcome,
        progress: @escaping @Sendable (FleetProgress, Outcome) -> Void
    ) -> (outcomes: [Outcome], duration: Duration, workers: Int) {
        let stopwatch = Stopwatch()
        let sizes = paths.map { FileSystem.size(of: $0) ?? 0 }
        let state = FleetState<Outcome>(count: paths.count, bytesTotal: sizes.reduce(0, +))
        let workers = min(max(1, jobs), max(1, paths.count))
        // Joined, not only finished: a command that exits right after this returns must not
        // race a worker still tearing down its thread (see JoinedThreads).
        JoinedThreads.run(count: workers, stackSize: 4 << 20) {
            while let index = state.nextIndex() {
                let outcome = work(index, sizes[index])
                state.finish(index, outcome, bytes: sizes[index], failed: isFailure(outcome), elapsed: stopwatch.elapsed, report: progress)
            }
        }
        return (state.outcomes(), stopwatch.elapsed, workers)
    }
}

/// The shared state of a fleet run's workers. Every member is used with `lock` held.
private final class FleetState<Outcome: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var next = 0
    private var done = 0
    private var failed = 0
    private var bytesDone: Int64 = 0
    private let bytesTotal: Int64
    private var results: [Outcome?]

    init(count: Int, bytesTotal: Int64) {
        results = Array(repeating: nil, count: count)
        self.bytesTotal = bytesTotal
    }

    func nextIndex() -> Int? {
        lock.withLock {
            guard next < results.count else { return nil }
            defer { next += 1 }
            return next
        }
    }

    func finish(_ index: Int, _ outcome: Outcome, bytes: Int64, failed isFailure: Bool, elapsed: Duration, report: (FleetProgress, Outcome) -> Void) {
        lock.withLock {
            results[index] = outcome
            done += 1
            bytesDone += bytes
            if isFailure { failed += 1 }
            report(FleetProgress(done: done, total: results.count, bytesDone: bytesDone, bytesTotal: bytesTotal, elapsed: elapsed, failed: failed), outcome)
        }
    }

    func outcomes() -> [Outcome] {
        lock.withLock { results.compactMap { $0 } }
    }
}
