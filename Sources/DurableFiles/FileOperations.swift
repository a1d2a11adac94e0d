import Foundation

/// The durable file-system steps of the export path and of page re-encryption (create, write,
/// fsync, rename, link, unlink), as a value that can be replaced: tests pass their own to inject
/// failures or to simulate a power cut at each step. ``system`` does the real thing.
package struct FileOperations: Sendable {
    /// Flushes a file's data and metadata.
    package var fsync: @Sendable (_ path: String) throws(FileSystemError) -> Void
    /// Flushes a folder's entries (after a rename, link or unlink in it).
    package var fsyncDirectory: @Sendable (_ path: String) throws(FileSystemError) -> Void
    /// Atomically replaces `target` with `source` (same folder).
    package var rename: @Sendable (_ source: String, _ target: String) throws(FileSystemError) -> Void
    /// Links `source` to `target`, failing with `EEXIST` rather than replacing `target`.
    package var linkWithoutReplacing: @Sendable (_ source: String, _ target: String) throws(FileSystemError) -> Void
    /// Removes a name; a missing one is not an error.
    package var removeIfPresent: @Sendable (_ path: String) -> Void
    /// Creates a new file (failing if the name exists) with `mode`, owned like `ownerOf` where
    /// allowed (the mode exact with `ownerOf`, else narrowed by the umask), open for reading and writing.
    package var createFile: @Sendable (_ path: String, _ mode: mode_t, _ ownerOf: String?) throws(FileSystemError) -> any RandomAccessFile
    /// Lets the seam see a file that the library writes through another handle (SQLite's own
    /// handle of the database): returns the handle to use instead. ``system`` returns it unchanged.
    package var observe: @Sendable (_ file: any RandomAccessFile) -> any RandomAccessFile
    /// Lets the seam see a new file the library has finished writing through SQLite (the export
    /// path's copy, a backup, a decrypted copy, a background rotation's copy once its last pages
    /// are in) before it verifies that file: tests alter the copy here to prove that the
    /// verification refuses it. ``system`` does nothing.
    package var written: @Sendable (_ path: String) -> Void = { _ in }

    /// The real system calls.
    package static let system = FileOperations(
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
