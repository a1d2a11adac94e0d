import Foundation
import Logging

// What the background-rotation benchmark's service records while it runs: its operations, the
// disk beside the database, the library's log; and the helpers its tasks run on.

/// The value at `fraction` (0...1) of `sorted`, or NaN when it is empty.
func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    let index = min(sorted.count - 1, max(0, Int((fraction * Double(sorted.count)).rounded(.up)) - 1))
    return sorted[index]
}

/// Runs a blocking call on a thread of its own (not one of the cooperative pool's two threads).
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.start()
    }
}

/// A flag set once, read by every task.
final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}

/// Every operation of the service: when it started, how long it took, whether it failed; and the
/// ledger rows whose writes returned.
final class ServiceLog: @unchecked Sendable {
    struct Operation {
        let start: Double
        let seconds: Double
        let isWrite: Bool
        let failed: Bool
    }

    private let lock = NSLock()
    // Invariant: only touched with `lock` held.
    private var recorded: [Operation] = []
    private var acked = Set<Int64>()
    private var firstFailure: String?

    static func key(task: Int, seq: Int) -> Int64 { Int64(task) << 32 | Int64(seq) }

    func record(start: Duration, seconds: Double, isWrite: Bool, acknowledged: (task: Int, seq: Int)? = nil, error: (any Error)? = nil) {
        lock.withLock {
            recorded.append(Operation(start: start.seconds, seconds: seconds, isWrite: isWrite, failed: error != nil))
            if let acknowledged { acked.insert(Self.key(task: acknowledged.task, seq: acknowledged.seq)) }
            if let error, firstFailure == nil { firstFailure = "\(error)" }
        }
    }

    var operations: [Operation] { lock.withLock { recorded } }
    var acknowledged: Set<Int64> { lock.withLock { acked } }
    var firstError: String? { lock.withLock { firstFailure } }
}

/// Samples, every 5 ms on a thread of its own, the total size of the files beside the database in
/// its folder (journal, WAL, shared memory, rotation temporaries). Only `stat`s them: it opens none.
final class DiskSampler: @unchecked Sendable {
    private let folder: String
    private let database: String
    private let lock = NSLock()
    // Invariant: only touched with `lock` held.
    private var samples: [(at: Double, bytes: Int64)] = []
    private var stopped = false
    private let done = DispatchSemaphore(value: 0)

    init(folder: String, database: String) {
        self.folder = folder
        self.database = database
    }

    func start(origin: ContinuousClock.Instant) {
        let thread = Thread { [self] in
            while !lock.withLock({ stopped }) {
                var total: Int64 = 0
                for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] where name != database {
                    var status = stat()
                    if stat(folder + "/" + name, &status) == 0 { total += Int64(status.st_size) }
                }
                let at = (ContinuousClock.now - origin).seconds
                lock.withLock { samples.append((at, total)) }
                usleep(5000)
            }
            done.signal()
        }
        thread.start()
    }

    func stop() {
        lock.withLock { stopped = true }
        done.wait()
    }

    /// The largest total sampled between `from` and `to` (seconds since the origin).
    func peak(from: Double, to: Double) -> Int64 {
        lock.withLock { samples.filter { $0.at >= from && $0.at <= to }.map(\.bytes).max() ?? 0 }
    }
}

/// The log entries of one case, for the swap's phases (`swap_phases_ms`).
final class LogSink: @unchecked Sendable {
    struct Entry {
        let message: String
        let metadata: [String: String]
    }

    private let lock = NSLock()
    // Invariant: only touched with `lock` held.
    private var captured: [Entry] = []

    func add(_ entry: Entry) { lock.withLock { captured.append(entry) } }
    var entries: [Entry] { lock.withLock { captured } }
}

struct CapturingHandler: LogHandler {
    let sink: LogSink
    var logLevel: Logger.Level = .notice
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        sink.add(.init(message: "\(event.message)", metadata: all.mapValues { "\($0)" }))
    }
}
