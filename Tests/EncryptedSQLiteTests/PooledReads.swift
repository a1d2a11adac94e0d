import DurableFiles
@testable import EncryptedSQLite
import Foundation
import TestSupport

/// Reads that are all inside their closures at the same instant, so a pool of `count` readers
/// has `count` connections open (one read at a time would reuse a single reader).
enum PooledReads {
    struct Timeout: Error, CustomStringConvertible {
        let entered: Int
        var description: String { "only \(entered) reads entered their closures within 20 s" }
    }

    /// Runs `count` reads on threads of their own; each runs `body`, then waits until all have
    /// run it, then `whileHeld` runs (every read still open), then they finish. Returns each
    /// read's result.
    static func holdAtOnce<T: Sendable>(_ database: EncryptedDatabase, count: Int, _ body: @escaping @Sendable (Connection) throws -> T,
                                        whileHeld: () throws -> Void = {}) throws -> [T] {
        let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let results = Locked<[Result<T, any Error>]>([])
        let group = DispatchGroup()
        for _ in 0..<count {
            group.enter()
            OwnThread.start {
                defer { group.leave() }
                let result = Result {
                    try database.read { db in
                        defer { entered.signal(); release.wait() }
                        return try body(db)
                    }
                }
                results.withLock { $0.append(result) }
                if case .failure = result { entered.signal() }
            }
        }
        var arrived = 0
        while arrived < count, entered.wait(timeout: .now() + 120) == .success { arrived += 1 }
        var heldError: (any Error)?
        if arrived == count {
            do { try whileHeld() } catch { heldError = error }
        }
        for _ in 0..<count { release.signal() }
        group.wait()
        guard arrived == count else { throw Timeout(entered: arrived) }
        if let heldError { throw heldError }
        return try results.withLock { try $0.map { try $0.get() } }
    }
}

extension PooledReads {
    /// Waits until `count` reads of `database` wait for a reader of its pool (every reader busy):
    /// a poll of the pool's own count, then checked; `false` after `limit`, a hang guard (long: in a
    /// full run other suites' synchronous tests can hold the cooperative threads the reads need).
    static func waiting(_ database: EncryptedDatabase, count: Int = 1, limit: Duration = .seconds(600)) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while (database.readers?.waitingCount ?? 0) < count {
            if ContinuousClock.now >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(1))  // paces the poll; not an order
        }
        return true
    }
}
