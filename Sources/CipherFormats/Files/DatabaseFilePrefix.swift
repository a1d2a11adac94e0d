import DurableFiles
import Foundation
import SQLCipherConnection

/// Reads the first bytes of a database file (its header, its salt, its first page) through
/// SQLite's own file layer, never through a descriptor of the library's own.
///
/// SQLite's locks are POSIX `fcntl` locks, which belong to the process: closing *any* descriptor
/// of the file drops every lock the process holds on it, including the locks of connections that
/// are open in the meantime (another ``EncryptedDatabase`` on the same file, a pooled reader, a
/// connection in WAL mode, whose shared lock tells other processes it is still there). SQLite's
/// unix file layer keeps such a descriptor open until the process's locks on the file are
/// released; a key-less, read-only connection that only reads raw bytes gets that for free.
/// (A lost shared lock lets another process checkpoint and delete a WAL file this process is
/// still committing into.)
enum DatabaseFilePrefix {
    /// Up to `count` bytes from the start of the file at `path` (fewer when it is shorter), or the
    /// reason they could not be read.
    static func read(_ path: String, count: Int) -> Result<[UInt8], ReadFailure> {
        let connection: Connection
        do {
            connection = try Connection(rawFileAt: path)
        } catch {
            return .failure(ReadFailure(reason: access(path, R_OK) == 0 ? "\(error)" : String(cString: strerror(errno))))
        }
        defer { connection.close() }
        return read(from: connection, count: count)
    }

    /// Up to `count` bytes from the start of the file `connection` has open (its main database),
    /// read through SQLite's file layer with the connection's own descriptor.
    static func read(from connection: Connection, count: Int) -> Result<[UInt8], ReadFailure> {
        do {
            let file = try connection.mainDatabaseFile()
            var bytes = [UInt8](repeating: 0, count: count)
            let read = try bytes.withUnsafeMutableBytes { buffer throws(FileSystemError) in try file.read(into: buffer, at: 0) }
            return .success(Array(bytes.prefix(read)))
        } catch {
            return .failure(ReadFailure(reason: "\(error)"))
        }
    }

    /// Why the first bytes of a file could not be read.
    struct ReadFailure: Error {
        let reason: String
    }
}
