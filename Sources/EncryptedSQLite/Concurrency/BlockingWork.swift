import Foundation

/// Runs work that may block (waiting for a pooled reader, for the writer's lock, for another
/// process to step aside, for the disk) on threads that Dispatch does not ration, and lets
/// ``EncryptedDatabase/close()`` wait until all of it ended.
///
/// Dispatch's global queues, and the concurrent queues that target them, start about one thread
/// per core; while their threads are blocked, anything else queued there (a deadline's timer, an
/// async read) waits about a second for each blocked item beyond that. A test suite or a service
/// that blocks a few of them (another database's reads, a `concurrentPerform`) then turned a
/// 300 ms wait limit into 30 s, and left queued reads waiting for minutes. A serial queue targets
/// the overcommitting pool instead, which starts a thread for work that finds none free: each item
/// gets a serial queue of its own, and deadlines share one serial queue (``timers``).
///
/// ```swift
/// let blocking = BlockingWork(label: "EncryptedSQLite.reads")
/// blocking.async { _ = try? pool.withReader { db in … } }
/// await blocking.drained()   // every item queued before has ended
/// ```
final class BlockingWork: @unchecked Sendable {
    // @unchecked: `label` is immutable and DispatchGroup is thread-safe.
    private let label: String
    private let inFlight = DispatchGroup()

    init(label: String) {
        self.label = label
    }

    /// Runs `work` on a thread of its own (taken from idle ones when there are).
    func async(_ work: @escaping @Sendable () -> Void) {
        inFlight.enter()
        DispatchQueue(label: label).async { [inFlight] in
            work()
            inFlight.leave()
        }
    }

    /// Returns once every item queued before the call has ended, suspended meanwhile.
    func drained() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            inFlight.notify(queue: Self.timers) { continuation.resume() }
        }
    }

    /// ``drained()`` for code that is not async: blocks the calling thread.
    func waitUntilDrained() {
        inFlight.wait()
    }

    /// Runs `work` on a thread of its own, with nothing to wait for it.
    static func detached(label: String, _ work: @escaping @Sendable () -> Void) {
        DispatchQueue(label: label).async(execute: work)
    }

    /// The serial queue of every deadline: its timers fire on time whatever blocks the global
    /// queues. What it runs must be short (resuming a caller).
    static let timers = DispatchQueue(label: "EncryptedSQLite.timers")
}
