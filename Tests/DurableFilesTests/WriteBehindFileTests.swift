import DurableFiles
import Foundation
import Synchronization
import Testing
import TestSupport

/// A file whose syncs are counted; the first one fails when asked to.
private final class CountingFile: RandomAccessFile, @unchecked Sendable {
    let base: any RandomAccessFile
    let syncs = Atomic<Int>(0)
    let failFirstSync: Bool

    init(_ base: any RandomAccessFile, failFirstSync: Bool) {
        self.base = base
        self.failFirstSync = failFirstSync
    }

    var path: String { base.path }
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(FileSystemError) -> Int { try base.read(into: buffer, at: offset) }
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(FileSystemError) { try base.write(bytes, at: offset) }
    func synchronize() throws(FileSystemError) {
        if syncs.add(1, ordering: .relaxed).oldValue == 0 && failFirstSync { throw .failed(operation: "fsync \(path)", errno: EIO) }
        try base.synchronize()
    }
    func size() throws(FileSystemError) -> Int64 { try base.size() }
    func close() { base.close() }
}

@Suite("WriteBehindFile: background syncs while a file is written")
struct WriteBehindFileTests {
    @Test("writes from two threads land intact, the file is synced in the background on the way, and the final sync waits for it")
    func syncsOnTheWay() throws {
        let directory = TemporaryDirectory("write-behind")
        let counting = CountingFile(try DescriptorFile(creating: directory.file("data"), mode: 0o600, ownerOf: nil), failFirstSync: false)
        let file = WriteBehindFile(counting, interval: 64 * 1024)
        let chunk = 16 * 1024, chunks = 256
        DispatchQueue.concurrentPerform(iterations: 2) { worker in
            var bytes = [UInt8](repeating: 0, count: chunk)
            for index in stride(from: worker, to: chunks, by: 2) {
                for offset in 0..<chunk { bytes[offset] = UInt8(truncatingIfNeeded: index &+ offset) }
                bytes.withUnsafeBytes { try? file.write($0, at: Int64(index * chunk)) }
            }
        }
        try file.synchronize()
        // At least one sync on the way (one every 64 KiB at most, one at a time) and the final one.
        #expect(counting.syncs.load(ordering: .relaxed) >= 2)
        let data = try #require(TestFiles.contents(directory.file("data")))
        #expect(data.count == chunk * chunks)
        #expect(data.enumerated().allSatisfy { $0.element == UInt8(truncatingIfNeeded: $0.offset / chunk &+ $0.offset % chunk) })
        file.close()
    }

    @Test("a background sync that fails is reported by the next synchronize, not lost, even when the final sync succeeds")
    func backgroundFailure() throws {
        let directory = TemporaryDirectory("write-behind-failure")
        let counting = CountingFile(try DescriptorFile(creating: directory.file("data"), mode: 0o600, ownerOf: nil), failFirstSync: true)
        let file = WriteBehindFile(counting, interval: 1024)
        let bytes = [UInt8](repeating: 7, count: 4096)
        try bytes.withUnsafeBytes { try file.write($0, at: 0) }
        #expect(throws: FileSystemError.self) { try file.synchronize() }
        file.close()
        #expect(counting.syncs.load(ordering: .relaxed) >= 1)
    }
}
