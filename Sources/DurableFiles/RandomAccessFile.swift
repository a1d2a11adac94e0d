import Foundation

/// A file read and written at byte offsets: the database (through SQLite's own handle, see
/// `Connection.mainDatabaseFile()`) and the rollback journal of a page re-encryption.
///
/// Implementations must allow concurrent reads and writes of distinct ranges from several threads
/// (they are `pread`/`pwrite` underneath).
package protocol RandomAccessFile: AnyObject, Sendable {
    /// The file's path, for errors.
    var path: String { get }
    /// Reads up to `buffer.count` bytes at `offset`; returns how many were read (fewer at the end).
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(FileSystemError) -> Int
    /// Writes all of `bytes` at `offset`.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(FileSystemError)
    /// Flushes the file's data to stable storage.
    func synchronize() throws(FileSystemError)
    /// The file's size in bytes.
    func size() throws(FileSystemError) -> Int64
    /// Releases the handle (no-op for handles owned by someone else).
    func close()
}

/// A file this library opened itself, by descriptor.
package final class DescriptorFile: RandomAccessFile, @unchecked Sendable {
    package let path: String
    // Invariant: set once in init; -1 after close(), which callers do once, after all I/O.
    private var descriptor: Int32

    /// Creates `path` (failing if it exists) with `mode`, owned like `owner` when allowed (root
    /// only; the mode is then exact, else narrowed by the umask), open for reading and writing,
    /// and holds an exclusive `flock` on it until closed, so that a later run can tell it from the
    /// leftover of a dead process (``LockedNewFile``).
    package init(creating path: String, mode: mode_t, ownerOf owner: String?) throws(FileSystemError) {
        self.path = path
        descriptor = try FileSystem.createLocked(path, mode: mode, ownerOf: owner)
    }

    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(FileSystemError) -> Int {
        var done = 0
        while done < buffer.count {
            let count = pread(descriptor, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            if count < 0 {
                if errno == EINTR { continue }
                throw .failed(operation: "read \(path)", errno: errno)
            }
            if count == 0 { break }
            done += count
        }
        return done
    }

    package func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(FileSystemError) {
        var done = 0
        while done < bytes.count {
            let count = pwrite(descriptor, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if count < 0 {
                if errno == EINTR { continue }
                throw .failed(operation: "write \(path)", errno: errno)
            }
            done += count
        }
    }

    package func synchronize() throws(FileSystemError) {
        guard Foundation.fsync(descriptor) == 0 else { throw .failed(operation: "fsync \(path)", errno: errno) }
    }

    package func size() throws(FileSystemError) -> Int64 {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw .failed(operation: "stat \(path)", errno: errno) }
        return Int64(status.st_size)
    }

    package func close() {
        guard descriptor >= 0 else { return }
        Foundation.close(descriptor)
        descriptor = -1
    }

    deinit { close() }
}
