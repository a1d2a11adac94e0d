import Foundation

/// A heap buffer for key material that is zeroed before its memory is freed.
///
/// It never prints its contents: `description`, `debugDescription` and reflection all show a
/// fixed placeholder. It is immutable after creation, which makes sharing it across threads safe.
package final class SecretBytes: @unchecked Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let storage: UnsafeMutableRawBufferPointer

    /// Copies `bytes` into a new buffer.
    init(copying bytes: some Collection<UInt8>) {
        storage = .allocate(byteCount: max(bytes.count, 1), alignment: 16)
        _ = storage.initializeMemory(as: UInt8.self, from: bytes)
        count = bytes.count
    }

    /// A buffer of `count` bytes filled by `fill`, which receives the uninitialized buffer.
    package init(count: Int, fill: (UnsafeMutableRawBufferPointer) -> Void) {
        storage = .allocate(byteCount: max(count, 1), alignment: 16)
        storage.initializeMemory(as: UInt8.self, repeating: 0)
        self.count = count
        fill(UnsafeMutableRawBufferPointer(rebasing: storage[0..<count]))
    }

    deinit {
        explicit_bzero(storage.baseAddress!, storage.count)
        #if DEBUG
        SecretBytes.zeroingObserver.notify(UnsafeRawBufferPointer(storage))
        #endif
        storage.deallocate()
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
    func isEqual(to other: SecretBytes) -> Bool {
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
