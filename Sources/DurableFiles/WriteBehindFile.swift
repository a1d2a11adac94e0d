import Foundation

/// A file being written in bulk whose data goes to the disk while it is written: after every
/// `interval` bytes written, a background thread syncs the file (one sync at a time), so that the
/// disk works while the writers compute, and the final ``synchronize()`` waits only for the rest.
///
/// The syncs on the way promise nothing: only ``synchronize()`` does, as for any file. An error
/// of a background sync is kept and thrown by the next ``synchronize()`` (Linux reports a failed
/// writeback to one `fsync` only, so it must not be lost).
package final class WriteBehindFile: RandomAccessFile, @unchecked Sendable {
    private let base: any RandomAccessFile
    private let interval: Int
    private struct State {
        var unsynced = 0
        var syncing = false
        var failure: FileSystemError?
    }
    // Invariant: only touched with the mutex held.
    private let state = Locked(State())
    private let idle = DispatchGroup()

    /// Wraps `base`, syncing it in the background after every `interval` bytes written.
    package init(_ base: any RandomAccessFile, interval: Int) {
        self.base = base
        self.interval = max(1, interval)
    }

    package var path: String { base.path }

    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(FileSystemError) -> Int {
        try base.read(into: buffer, at: offset)
    }

    package func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(FileSystemError) {
        try base.write(bytes, at: offset)
        let start = state.withLock { state -> Bool in
            state.unsynced += bytes.count
            guard state.unsynced >= interval, !state.syncing, state.failure == nil else { return false }
            state.unsynced = 0
            state.syncing = true
            return true
        }
        guard start else { return }
        idle.enter()
        Thread.detachNewThread { [self] in
            var failure: FileSystemError?
            do throws(FileSystemError) { try base.synchronize() } catch { failure = error }
            state.withLock { state in
                state.syncing = false
                if state.failure == nil { state.failure = failure }
            }
            idle.leave()
        }
    }

    /// Waits for a background sync in flight, then syncs the file.
    /// - Throws: the error of a background sync, or of this one.
    package func synchronize() throws(FileSystemError) {
        idle.wait()
        if let failure = state.withLock({ $0.failure }) { throw failure }
        try base.synchronize()
    }

    package func size() throws(FileSystemError) -> Int64 { try base.size() }

    /// Waits for a background sync in flight, then closes the file.
    package func close() {
        idle.wait()
        base.close()
    }
}
