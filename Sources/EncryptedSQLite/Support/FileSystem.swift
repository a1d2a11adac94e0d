import Foundation

/// The few file-system operations whose order and durability the library relies on.
enum FileSystem {
    /// Flushes a file's data and metadata to stable storage.
    static func fsync(path: String) throws(FileSystemError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .failed(operation: "open \(path) for fsync", errno: errno) }
        defer { close(descriptor) }
        guard Foundation.fsync(descriptor) == 0 else { throw .failed(operation: "fsync \(path)", errno: errno) }
    }

    /// Flushes a folder, so that a rename or link inside it survives a power cut.
    static func fsyncDirectory(_ path: String) throws(FileSystemError) {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .failed(operation: "open folder \(path) for fsync", errno: errno) }
        defer { close(descriptor) }
        guard Foundation.fsync(descriptor) == 0 else { throw .failed(operation: "fsync folder \(path)", errno: errno) }
    }

    /// Makes `target` a name of `source`'s file, failing with `EEXIST` rather than replacing an
    /// existing `target`.
    static func linkWithoutReplacing(_ source: String, to target: String) throws(FileSystemError) {
        guard link(source, target) == 0 else { throw .failed(operation: "link \(source) to \(target)", errno: errno) }
    }

    /// Creates `path` (failing if it exists) with `mode`, owned like `owner` when allowed (root
    /// only), open for reading and writing, with an exclusive `flock` held; returns the descriptor.
    static func createLocked(_ path: String, mode: mode_t, ownerOf owner: String?) throws(FileSystemError) -> Int32 {
        let descriptor = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard descriptor >= 0 else { throw .failed(operation: "create \(path)", errno: errno) }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            close(descriptor)
            unlink(path)
            throw .failed(operation: "lock \(path)", errno: code)
        }
        _ = fchmod(descriptor, mode)
        var status = stat()
        if let owner, stat(owner, &status) == 0 {
            _ = fchown(descriptor, status.st_uid, status.st_gid)  // only root may give it away; ignore EPERM
        }
        return descriptor
    }

    /// Removes a file; a missing file is not an error.
    static func removeIfPresent(_ path: String) {
        _ = unlink(path)
    }

    /// Bytes available to this process in the file system holding `path`.
    static func availableBytes(at path: String) -> Int64? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    /// The largest file this process may write (RLIMIT_FSIZE), or `nil` when unlimited.
    static func fileSizeLimit() -> Int64? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else { return nil }
        return Int64(clamping: limit.rlim_cur)
    }

    /// The size of a file, or `nil` when it cannot be read.
    static func size(of path: String) -> Int64? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return Int64(status.st_size)
    }

    /// A file's permission bits, or `nil` when it cannot be read.
    static func permissions(of path: String) -> mode_t? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return status.st_mode & 0o7777
    }

    /// The folder that holds `path`.
    static func folder(of path: String) -> String {
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        return folder.isEmpty ? "." : folder
    }
}

/// A failed system call, with the operation and `errno`.
struct FileSystemError: Error, CustomStringConvertible {
    let operation: String
    let code: Int32

    static func failed(operation: String, errno code: Int32) -> FileSystemError {
        FileSystemError(operation: operation, code: code)
    }

    var description: String { "\(operation): \(String(cString: strerror(code)))" }
}

/// A file read and written at byte offsets: the database (through SQLite's own handle, see
/// `Connection.mainDatabaseFile()`) and the rollback journal of a page re-encryption.
///
/// Implementations must allow concurrent reads and writes of distinct ranges from several threads
/// (they are `pread`/`pwrite` underneath).
protocol RandomAccessFile: AnyObject, Sendable {
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
final class DescriptorFile: RandomAccessFile, @unchecked Sendable {
    let path: String
    // Invariant: set once in init; -1 after close(), which callers do once, after all I/O.
    private var descriptor: Int32

    /// Creates `path` (failing if it exists) with `mode`, owned like `owner` when allowed (root
    /// only), open for reading and writing, and holds an exclusive `flock` on it until closed, so
    /// that a later run can tell it from the leftover of a dead process (``LockedNewFile``).
    init(creating path: String, mode: mode_t, ownerOf owner: String?) throws(FileSystemError) {
        self.path = path
        descriptor = try FileSystem.createLocked(path, mode: mode, ownerOf: owner)
    }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(FileSystemError) -> Int {
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

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(FileSystemError) {
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

    func synchronize() throws(FileSystemError) {
        guard Foundation.fsync(descriptor) == 0 else { throw .failed(operation: "fsync \(path)", errno: errno) }
    }

    func size() throws(FileSystemError) -> Int64 {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw .failed(operation: "stat \(path)", errno: errno) }
        return Int64(status.st_size)
    }

    func close() {
        guard descriptor >= 0 else { return }
        Foundation.close(descriptor)
        descriptor = -1
    }

    deinit { close() }
}

/// The durable file-system steps of the export path and of page re-encryption (create, write,
/// fsync, rename, link, unlink), as a value that can be replaced: tests pass their own to inject
/// failures or to simulate a power cut at each step. ``system`` does the real thing.
struct FileOperations: Sendable {
    /// Flushes a file's data and metadata.
    var fsync: @Sendable (_ path: String) throws(FileSystemError) -> Void
    /// Flushes a folder's entries (after a rename, link or unlink in it).
    var fsyncDirectory: @Sendable (_ path: String) throws(FileSystemError) -> Void
    /// Atomically replaces `target` with `source` (same folder).
    var rename: @Sendable (_ source: String, _ target: String) throws(FileSystemError) -> Void
    /// Links `source` to `target`, failing with `EEXIST` rather than replacing `target`.
    var linkWithoutReplacing: @Sendable (_ source: String, _ target: String) throws(FileSystemError) -> Void
    /// Removes a name; a missing one is not an error.
    var removeIfPresent: @Sendable (_ path: String) -> Void
    /// Creates a new file (failing if the name exists) with `mode`, owned like `ownerOf` where
    /// allowed, open for reading and writing.
    var createFile: @Sendable (_ path: String, _ mode: mode_t, _ ownerOf: String?) throws(FileSystemError) -> any RandomAccessFile
    /// Lets the seam see a file that the library writes through another handle (SQLite's own
    /// handle of the database): returns the handle to use instead. ``system`` returns it unchanged.
    var observe: @Sendable (_ file: any RandomAccessFile) -> any RandomAccessFile

    /// The real system calls.
    static let system = FileOperations(
        fsync: { path throws(FileSystemError) in try FileSystem.fsync(path: path) },
        fsyncDirectory: { path throws(FileSystemError) in try FileSystem.fsyncDirectory(path) },
        rename: { source, target throws(FileSystemError) in
            guard Foundation.rename(source, target) == 0 else {
                throw .failed(operation: "rename \(source) to \(target)", errno: errno)
            }
        },
        linkWithoutReplacing: { source, target throws(FileSystemError) in try FileSystem.linkWithoutReplacing(source, to: target) },
        removeIfPresent: { path in FileSystem.removeIfPresent(path) },
        createFile: { path, mode, owner throws(FileSystemError) in try DescriptorFile(creating: path, mode: mode, ownerOf: owner) },
        observe: { $0 })
}

/// A new file created exclusively and held with an exclusive `flock` while it is being written,
/// so that a later run can tell a stale leftover (no live process holds it) from a file another
/// process is still writing. `flock` locks are independent of SQLite's `fcntl` locks on Linux.
final class LockedNewFile {
    let path: String
    private var descriptor: Int32

    /// Creates `path` (failing if it exists) with `mode`, owned like `owner` when allowed, and locks it.
    init(path: String, mode: mode_t, ownerOf owner: String?) throws(FileSystemError) {
        self.path = path
        descriptor = try FileSystem.createLocked(path, mode: mode, ownerOf: owner)
    }

    /// Releases the lock (the file stays).
    func unlock() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
    }

    deinit { unlock() }

    /// `true` when no process holds `path` locked (so it is a leftover of a dead process).
    static func isAbandoned(_ path: String) -> Bool {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { return false }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else { return false }
        flock(descriptor, LOCK_UN)
        return true
    }
}
