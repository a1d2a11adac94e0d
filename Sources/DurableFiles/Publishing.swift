import Foundation

/// Why a complete file could not be given its final name by ``FileOperations/publish(_:as:replacing:synchronize:)``.
package enum PublishFailure: Error, CustomStringConvertible {
    /// The target name exists (and publishing was not allowed to replace it); nothing changed.
    case targetExists
    /// A step before the file got its name failed; the target is as it was.
    case notPublished(FileSystemError)
    /// The file has its name, but the folder could not be flushed: a power cut may still undo the
    /// naming.
    case folderNotSynced(FileSystemError)

    /// The failed step and its system error.
    package var description: String {
        switch self {
        case .targetExists: return "the target exists"
        case .notPublished(let error), .folderNotSynced(let error): return error.description
        }
    }

    /// `true` for ``folderNotSynced(_:)``: the file is in place all the same.
    package var isFolderNotSynced: Bool {
        if case .folderNotSynced = self { return true }
        return false
    }

    /// The underlying system error, when there is one.
    package var fileSystemError: FileSystemError? {
        switch self {
        case .targetExists: return nil
        case .notPublished(let error), .folderNotSynced(let error): return error
        }
    }
}

extension FileOperations {
    /// Gives the complete file at `temporary` its final name `target` (same folder), durably:
    /// flushes the file (unless `synchronize` is off because the caller flushed its own handle),
    /// then links it to `target` (never replacing a file there; the temporary name is then
    /// removed) or, with `replacing`, renames it over `target`; last, flushes the folder so that
    /// the new name survives a power cut.
    ///
    /// This is the one path by which the library makes a file appear under a name it matters:
    /// a new database, an exported or decrypted copy, a rotation's journal. The file appears there
    /// only complete and durable.
    /// - Throws: ``PublishFailure``.
    package func publish(_ temporary: String, as target: String, replacing: Bool, synchronize: Bool = true) throws(PublishFailure) {
        do {
            if synchronize { try fsync(temporary) }
            if replacing {
                try rename(temporary, target)
            } else {
                try linkWithoutReplacing(temporary, target)
            }
        } catch where !replacing && error.code == EEXIST {
            throw .targetExists
        } catch {
            throw .notPublished(error)
        }
        if !replacing { removeIfPresent(temporary) }
        do {
            try fsyncDirectory(FileSystem.folder(of: target))
        } catch {
            throw .folderNotSynced(error)
        }
    }

    /// Removes a temporary database file and the SQLite side files beside it (its own journal
    /// first: a journal without its database is harmless, the other way round SQLite would find a
    /// hot journal for a file that is gone).
    func removeWithSideFiles(_ path: String) {
        for suffix in ["-journal", "-wal", "-shm"] { removeIfPresent(path + suffix) }
        removeIfPresent(path)
    }
}

/// A new file that is written under a temporary name and published under its final name only
/// when complete (see ``FileOperations/publish(_:as:replacing:synchronize:)``).
///
/// The temporary is created exclusively and held with an exclusive `flock` while this value
/// lives, so that a later run can tell the leftover of a dead process from a file that another
/// process is still writing (``LockedNewFile/isAbandoned(_:)``). SQLite opens the temporary by
/// its path; this type only owns its name and lock.
package final class DurableNewFile {
    /// Where the file is written until it is published.
    package let temporaryPath: String
    private let lock: LockedNewFile
    private let files: FileOperations
    private var published = false

    /// Creates the temporary (failing if it exists) with `mode`, owned like `ownerOf` where
    /// allowed (root only), and locks it. The mode is exact with `ownerOf`, narrowed by the umask
    /// without (``FileSystem/createLocked(_:mode:ownerOf:)``).
    /// - Throws: ``FileSystemError`` when it cannot be created or locked.
    package init(temporaryPath: String, mode: mode_t, ownerOf owner: String?, files: FileOperations) throws(FileSystemError) {
        self.temporaryPath = temporaryPath
        self.files = files
        lock = try LockedNewFile(path: temporaryPath, mode: mode, ownerOf: owner)
    }

    /// Publishes the file as `target` (see ``FileOperations/publish(_:as:replacing:synchronize:)``).
    /// After a ``PublishFailure/folderNotSynced(_:)`` the file is published all the same.
    /// - Throws: ``PublishFailure``.
    package func publish(as target: String, replacing: Bool) throws(PublishFailure) {
        do {
            try files.publish(temporaryPath, as: target, replacing: replacing)
            published = true
        } catch {
            if case .folderNotSynced = error { published = true }
            throw error
        }
    }

    /// Releases the lock. Unless the file was published, its temporary and any SQLite side files
    /// beside it are removed first.
    package func close() {
        if !published { files.removeWithSideFiles(temporaryPath) }
        lock.unlock()
    }

    deinit { close() }
}
