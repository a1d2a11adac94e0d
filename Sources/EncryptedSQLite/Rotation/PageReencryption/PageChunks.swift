import DurableFiles
import Foundation
import Synchronization

/// The pages 1...pageCount in chunks of `chunkPages`, processed by several threads.
struct PageChunks {
    let pageCount: UInt32
    let chunkPages: Int

    var chunkCount: Int { (Int(pageCount) + chunkPages - 1) / chunkPages }

    /// Runs `work` on every chunk (first page number, page count) on up to `workers` threads; each
    /// thread first makes its own state with `makeState`. Stops at the first error and rethrows it.
    func forEach<State>(workers: Int, makeState: @Sendable () throws -> State, work: @Sendable (inout State, UInt32, Int) throws -> Void) throws {
        let next = Atomic<Int>(0)
        let failure = Locked<(any Error)?>(nil)
        let threads = max(1, min(workers, chunkCount))
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            do {
                var state = try makeState()
                while failure.withLock({ $0 == nil }) {
                    let index = next.add(1, ordering: .relaxed).oldValue
                    guard index < chunkCount else { break }
                    let first = UInt32(index * chunkPages + 1)
                    let count = min(chunkPages, Int(pageCount) - index * chunkPages)
                    try work(&state, first, count)
                }
            } catch {
                failure.withLock { if $0 == nil { $0 = error } }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
    }
}

/// A heap buffer owned by one worker thread, zeroed before it is freed (it holds decrypted pages).
final class PageBuffer {
    let bytes: UnsafeMutableRawBufferPointer

    init(count: Int) {
        bytes = .allocate(byteCount: max(count, 1), alignment: 64)
        bytes.initializeMemory(as: UInt8.self, repeating: 0)
    }

    deinit {
        explicit_bzero(bytes.baseAddress!, bytes.count)
        bytes.deallocate()
    }

    /// The first `count` bytes.
    func prefix(_ count: Int) -> UnsafeMutableRawBufferPointer { UnsafeMutableRawBufferPointer(rebasing: bytes[0..<count]) }
}
