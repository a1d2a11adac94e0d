import Foundation

/// A buffer for key material that is zeroed before its memory is released.
///
/// Each buffer lives on pages of its own (an anonymous mapping), locked in memory with `mlock`
/// where `RLIMIT_MEMLOCK` allows, so that it is never written to swap, and marked
/// `MADV_DONTDUMP`, so that a core dump leaves it out (see ``SecretMemory``).
///
/// It never prints its contents: `description`, `debugDescription` and reflection all show a
/// fixed placeholder. It is immutable after creation, which makes sharing it across threads safe.
package final class SecretBytes: @unchecked Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let storage: UnsafeMutableRawBufferPointer
    private let locked: Bool

    /// Copies `bytes` into a new buffer.
    package convenience init(copying bytes: some Collection<UInt8>) {
        self.init(count: bytes.count) { buffer in _ = buffer.initializeMemory(as: UInt8.self, fromContentsOf: bytes) }
    }

    /// A buffer of `count` bytes filled by `fill`, which receives the buffer, zeroed.
    package init(count: Int, fill: (UnsafeMutableRawBufferPointer) -> Void) {
        (storage, locked) = SecretMemory.allocate(byteCount: count)
        self.count = count
        fill(UnsafeMutableRawBufferPointer(rebasing: storage[0..<count]))
    }

    deinit {
        explicit_bzero(storage.baseAddress!, storage.count)
        #if DEBUG
        SecretBytes.zeroingObserver.notify(UnsafeRawBufferPointer(storage))
        #endif
        SecretMemory.release(storage, locked: locked)
    }

    #if DEBUG
    /// Test-only: sees every buffer right after it was zeroed and before its memory is freed, so
    /// that a test can prove the zeroing happens. Compiled into debug builds only.
    static let zeroingObserver = ZeroingObserver()

    /// Where ``zeroingObserver`` reports to; thread-safe.
    final class ZeroingObserver: @unchecked Sendable {
        private let lock = NSLock()
        // Invariant: only touched with `lock` held.
        private var handlers: [UUID: @Sendable (UnsafeRawBufferPointer) -> Void] = [:]

        /// Calls `handler` with every buffer being freed until ``remove(_:)``.
        func add(_ handler: @escaping @Sendable (UnsafeRawBufferPointer) -> Void) -> UUID {
            let token = UUID()
            lock.withLock { handlers[token] = handler }
            return token
        }

        /// Stops calling the handler `token` stands for.
        func remove(_ token: UUID) {
            lock.withLock { handlers[token] = nil }
        }

        func notify(_ buffer: UnsafeRawBufferPointer) {
            let current = lock.withLock { Array(handlers.values) }
            for handler in current { handler(buffer) }
        }
    }
    #endif

    /// The number of bytes.
    package let count: Int

    /// Lends the bytes to `body`; they must not escape it.
    package func withUnsafeBytes<Result, Failure: Error>(_ body: (UnsafeRawBufferPointer) throws(Failure) -> Result) throws(Failure) -> Result {
        try body(UnsafeRawBufferPointer(rebasing: storage[0..<count]))
    }

    /// Constant-time-ish comparison of two secrets (length leaks, contents do not).
    package func isEqual(to other: SecretBytes) -> Bool {
        guard count == other.count else { return false }
        return withUnsafeBytes { mine in
            other.withUnsafeBytes { theirs in
                var difference: UInt8 = 0
                for index in 0..<mine.count { difference |= mine[index] ^ theirs[index] }
                return difference == 0
            }
        }
    }

    package var description: String { "<secret>" }
    package var debugDescription: String { "<secret>" }
    package var customMirror: Mirror { Mirror(self, children: [], displayStyle: .class) }
}
