import Foundation

/// The few file-system operations whose order and durability the library relies on.
package enum FileSystem {
    /// Flushes a file's data and metadata to stable storage.
    package static func fsync(path: String) throws(FileSystemError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .failed(operation: "open \(path) for fsync", errno: errno) }
        defer { close(descriptor) }
        guard Foundation.fsync(descriptor) == 0 else { throw .failed(operation: "fsync \(path)", errno: errno) }
    }

    /// Flushes a folder, so that a rename or link inside it survives a power cut.
    package static func fsyncDirectory(_ path: String) throws(FileSystemError) {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .failed(operation: "open folder \(path) for fsync", errno: errno) }
        defer { close(descriptor) }
        guard Foundation.fsync(descriptor) == 0 else { throw .failed(operation: "fsync folder \(path)", errno: errno) }
    }

    /// Makes `target` a name of `source`'s file, failing with `EEXIST` rather than replacing an
    /// existing `target`.
    package static func linkWithoutReplacing(_ source: String, to target: String) throws(FileSystemError) {
        guard link(source, target) == 0 else { throw .failed(operation: "link \(source) to \(target)", errno: errno) }
    }

    /// The mode of a new file that copies no other (a new database, a decrypted copy): owner read
    /// and write only, narrowed further by the process's umask, as `sqlite3` makes its files
    /// under the usual umasks. SQLite gives a database's `-journal`, `-wal` and `-shm` files the
    /// database's own mode.
    package static let newFileMode: mode_t = 0o600

    /// Creates `path` (failing if it exists), open for reading and writing, with an exclusive
    /// `flock` held; returns the descriptor.
    ///
    /// Without `owner`, the file gets `mode` narrowed by the umask, like any new file. With
    /// `owner` (a copy or journal that stands in for that file), it gets `mode` exactly, whatever
    /// the umask, and `owner`'s user and group when allowed (root only): a rotation never changes
    /// a database's mode or owner.
    static func createLocked(_ path: String, mode: mode_t, ownerOf owner: String?) throws(FileSystemError) -> Int32 {
        var descriptor: Int32 = -1
        // Another process's cleanup of stale temporaries (`LockedNewFile.removeIfAbandoned`) can
        // take the lock between our create and our lock, and remove the name: it holds the lock
        // while it removes, so after waiting for the lock, a name that no longer leads to our file
        // means it was removed. Then create it again.
        for _ in 0..<8 {
            descriptor = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode)
            guard descriptor >= 0 else { throw .failed(operation: "create \(path)", errno: errno) }
            var locked = flock(descriptor, LOCK_EX)
            while locked != 0 && errno == EINTR { locked = flock(descriptor, LOCK_EX) }
            guard locked == 0 else {
                let code = errno
                close(descriptor)
                unlink(path)
                throw .failed(operation: "lock \(path)", errno: code)
            }
            if isSameFile(descriptor, path) { break }
            close(descriptor)
            descriptor = -1
        }
        guard descriptor >= 0 else { throw .failed(operation: "create \(path) (removed by another process as it was created)", errno: EAGAIN) }
        guard let owner else { return descriptor }
        _ = fchmod(descriptor, mode)
        var status = stat()
        if stat(owner, &status) == 0 {
            _ = fchown(descriptor, status.st_uid, status.st_gid)  // only root may give it away; ignore EPERM
        }
        return descriptor
    }

    /// `true` when `path` names the file open as `descriptor`.
    static func isSameFile(_ descriptor: Int32, _ path: String) -> Bool {
        var open = stat(), named = stat()
        return fstat(descriptor, &open) == 0 && stat(path, &named) == 0 && open.st_dev == named.st_dev && open.st_ino == named.st_ino
    }

    /// Removes a file; a missing file is not an error.
    package static func removeIfPresent(_ path: String) {
        _ = unlink(path)
    }

    /// Bytes available to this process in the file system holding `path`.
    package static func availableBytes(at path: String) -> Int64? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    /// The largest file this process may write (RLIMIT_FSIZE), or `nil` when unlimited.
    package static func fileSizeLimit() -> Int64? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else { return nil }
        return Int64(clamping: limit.rlim_cur)
    }

    /// The size of a file, or `nil` when it cannot be read.
    package static func size(of path: String) -> Int64? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return Int64(status.st_size)
    }

    /// A file's permission bits, or `nil` when it cannot be read.
    package static func permissions(of path: String) -> mode_t? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return status.st_mode & 0o7777
    }

    /// The folder that holds `path`.
    package static func folder(of path: String) -> String {
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        return folder.isEmpty ? "." : folder
    }
}
