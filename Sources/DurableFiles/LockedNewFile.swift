import Foundation

/// A new file created exclusively and held with an exclusive `flock` while it is being written,
/// so that a later run can tell a stale leftover (no live process holds it) from a file another
/// process is still writing. `flock` locks are independent of SQLite's `fcntl` locks on Linux.
package final class LockedNewFile {
    package let path: String
    private var descriptor: Int32

    /// Creates `path` (failing if it exists) with `mode`, owned like `owner` when allowed, and locks it
    /// (the mode is exact with `owner`, narrowed by the umask without; see `FileSystem.createLocked`).
    package init(path: String, mode: mode_t, ownerOf owner: String?) throws(FileSystemError) {
        self.path = path
        descriptor = try FileSystem.createLocked(path, mode: mode, ownerOf: owner)
    }

    /// Releases the lock (the file stays).
    package func unlock() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
    }

    deinit { unlock() }

    /// Runs `remove` when no process holds `path` locked (so it is a leftover of a dead process),
    /// holding the lock meanwhile, so that a process creating a file of that name at that instant
    /// waits and then sees it was removed (`FileSystem.createLocked`). Returns `true` when it ran.
    package static func removeIfAbandoned(_ path: String, remove: () -> Void) -> Bool {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { return false }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else { return false }
        defer { flock(descriptor, LOCK_UN) }
        guard FileSystem.isSameFile(descriptor, path) else { return false }
        remove()
        return true
    }

    /// `true` when no process holds `path` locked (so it is a leftover of a dead process).
    package static func isAbandoned(_ path: String) -> Bool {
        removeIfAbandoned(path) {}
    }
}
