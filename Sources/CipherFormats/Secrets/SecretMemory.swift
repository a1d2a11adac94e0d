import Foundation

/// The memory ``SecretBytes`` lives in: whole pages of an anonymous mapping per buffer, locked with
/// `mlock` when `RLIMIT_MEMLOCK` allows (else left unlocked, and counted), and marked
/// `MADV_DONTDUMP` so that core dumps leave them out. Unmapping returns the pages to the kernel,
/// so a released buffer leaves no copy in the heap either. Every live buffer is known, and all
/// are zeroed when the process exits (an `atexit` handler), so that no key outlives the process
/// in memory however it ends its work.
///
/// A few released one-page buffers are kept mapped for the next allocations, zeroed, still
/// locked and still left out of core dumps (``SparePages``): an open of a database with a raw or
/// wrapped key makes and releases two or three secrets, and each fresh page cost five system
/// calls (`mmap`, `madvise`, `mlock`, then `munlock`, `munmap`).
enum SecretMemory {
    private static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
    private static let counters = Counters()
    private static let live = LiveBuffers()
    private static let spare = SparePages()

    /// How many buffers could not be locked in memory since the process started (the limit
    /// `RLIMIT_MEMLOCK` was reached, or locking is not allowed); those may be written to swap.
    static var unlockedAllocations: Int { counters.unlocked }

    /// `count` bytes (at least one page), zeroed, and whether they are locked in memory.
    static func allocate(byteCount count: Int) -> (UnsafeMutableRawBufferPointer, locked: Bool) {
        let length = max(1, (count + pageSize - 1) / pageSize) * pageSize
        if length == pageSize, let page = spare.take() {
            live.insert(page.0)
            return page
        }
        guard let address = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), address != MAP_FAILED else {
            fatalError("out of memory for a secret buffer of \(count) bytes")
        }
        _ = madvise(address, length, MADV_DONTDUMP)
        let locked = mlock(address, length) == 0
        if !locked { counters.countUnlocked() }
        let buffer = UnsafeMutableRawBufferPointer(start: address, count: length)
        live.insert(buffer)
        return (buffer, locked)
    }

    /// Unmaps a buffer made by ``allocate(byteCount:)`` (the caller has zeroed it).
    static func release(_ buffer: UnsafeMutableRawBufferPointer, locked: Bool) {
        live.remove(buffer)
        if buffer.count == pageSize {
            // Zeroed again here, whatever the caller did: a spare page holds nothing.
            explicit_bzero(buffer.baseAddress!, buffer.count)
            if spare.keep(buffer, locked: locked) { return }
        }
        if locked { _ = munlock(buffer.baseAddress, buffer.count) }
        _ = munmap(buffer.baseAddress, buffer.count)
    }

    /// Zeroes every live secret buffer. Runs when the process exits; afterwards every key this
    /// process held reads as zeros.
    static func wipeAll() {
        live.wipeAll()
    }

    /// The live buffers, and the `atexit` handler that zeroes them (installed with the first).
    private final class LiveBuffers: @unchecked Sendable {
        private let lock = NSLock()
        // Invariant: only touched with `lock` held.
        private var buffers: [UnsafeMutableRawPointer: Int] = [:]
        private var exitHandlerInstalled = false

        func insert(_ buffer: UnsafeMutableRawBufferPointer) {
            let install = lock.withLock {
                buffers[buffer.baseAddress!] = buffer.count
                defer { exitHandlerInstalled = true }
                return !exitHandlerInstalled
            }
            if install { atexit { SecretMemory.wipeAll() } }
        }

        func remove(_ buffer: UnsafeMutableRawBufferPointer) {
            _ = lock.withLock { buffers.removeValue(forKey: buffer.baseAddress!) }
        }

        func wipeAll() {
            lock.withLock {
                for (address, count) in buffers { explicit_bzero(address, count) }
            }
        }
    }

    /// Up to ``capacity`` released one-page buffers, zeroed, mapped, `MADV_DONTDUMP`, and
    /// locked when they were: at most 32 KiB of `RLIMIT_MEMLOCK` held while unused.
    private final class SparePages: @unchecked Sendable {
        static let capacity = 8
        private let lock = NSLock()
        // Invariant: only touched with `lock` held.
        private var pages: [(buffer: UnsafeMutableRawBufferPointer, locked: Bool)] = []

        func take() -> (UnsafeMutableRawBufferPointer, locked: Bool)? {
            lock.withLock { pages.popLast() }.map { ($0.buffer, locked: $0.locked) }
        }

        /// Keeps a zeroed page; `false` when enough are kept already.
        func keep(_ buffer: UnsafeMutableRawBufferPointer, locked: Bool) -> Bool {
            lock.withLock {
                guard pages.count < Self.capacity else { return false }
                pages.append((buffer, locked))
                return true
            }
        }
    }

    private final class Counters: @unchecked Sendable {
        private let lock = NSLock()
        // Invariant: only touched with `lock` held.
        private var unlockedCount = 0
        var unlocked: Int { lock.withLock { unlockedCount } }
        func countUnlocked() { lock.withLock { unlockedCount += 1 } }
    }
}
