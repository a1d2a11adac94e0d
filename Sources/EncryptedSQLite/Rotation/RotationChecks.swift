import DurableFiles
import Foundation
import SQLCipherConnection

/// The checks every rotation path makes before it writes, and the mapping of file-system failures
/// to ``EncryptedDatabaseError``, so that all paths report the same problem the same way.
struct RotationChecks {
    let path: String

    /// Throws ``EncryptedDatabaseError/readOnly(path:reason:)`` unless the connection, the file and
    /// its folder (where journals and temporaries are created) are writable.
    func requireWritable(_ connection: Connection) throws(EncryptedDatabaseError) {
        if connection.isReadOnly {
            throw .readOnly(path: path, reason: "the file could only be opened read-only")
        }
        let folder = FileSystem.folder(of: path)
        if access(path, W_OK) != 0 {
            throw .readOnly(path: path, reason: "the file is not writable: \(String(cString: strerror(errno)))")
        }
        if access(folder, W_OK) != 0 {
            throw .readOnly(path: path, reason: "its folder \(folder) is not writable (the rotation writes a journal or a new file there): \(String(cString: strerror(errno)))")
        }
    }

    /// Throws ``EncryptedDatabaseError/diskFull(path:detail:)`` unless the file system and the
    /// process file-size limit (`ulimit -f`) leave room for `bytes` more (plus a margin).
    func requireSpace(bytes: Int64, for what: String) throws(EncryptedDatabaseError) {
        let needed = bytes + bytes / 16 + 64 * 1024
        if let available = FileSystem.availableBytes(at: FileSystem.folder(of: path)), available < needed {
            throw .diskFull(path: path, detail: "\(what) needs about \(needed) bytes free, \(available) are available")
        }
        if let limit = FileSystem.fileSizeLimit(), limit < needed {
            throw .diskFull(path: path, detail: "the process file-size limit (ulimit -f) is \(limit) bytes; \(what) needs about \(needed)")
        }
    }

    /// The error for a failed file-system call during `operation`.
    func error(_ failure: FileSystemError, operation: String) -> EncryptedDatabaseError {
        switch failure.code {
        case ENOSPC, EDQUOT, EFBIG: return .diskFull(path: path, detail: "\(operation): \(failure.description)")
        case EACCES, EPERM, EROFS: return .readOnly(path: path, reason: "\(operation): \(failure.description)")
        default: return .ioFailure(path: path, operation: operation, detail: failure.description)
        }
    }
}
