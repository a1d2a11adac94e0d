import Foundation

/// A value shared between threads, reached only through ``withLock(_:)``: the same shape as
/// `Synchronization.Mutex`, on a Foundation `NSLock` (a pthread mutex).
///
/// Why not `Mutex`: on Linux, ThreadSanitizer does not see `Mutex`'s futex-based locking with
/// Swift 6.3, so every access it protects is reported as a data race (two threads incrementing a
/// `Mutex<Int>` are reported at once). A pthread mutex is seen, so the ThreadSanitizer run of
/// `scripts/test.sh` can check the code that shares state between worker threads.
///
/// `Value` is `Sendable` because ``withLock(_:)`` hands it to whichever thread holds the lock
/// (`Mutex` gets the same guarantee from `sending`).
///
/// ```swift
/// let failures = Locked(0)
/// DispatchQueue.concurrentPerform(iterations: 4) { _ in failures.withLock { $0 += 1 } }
/// ```
package final class Locked<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    // Invariant: only read or written with `lock` held.
    private var value: Value

    /// A lock around `value`.
    package init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with the value, holding the lock; rethrows what `body` throws.
    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
