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
