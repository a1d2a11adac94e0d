import DurableFiles
import Foundation

extension KeyedConnections {
    /// The trial of the read-only tools (``DatabaseInspection``,
    /// ``EncryptedDatabase/check(path:keys:busyTimeout:)``), which leave the file's folder as they
    /// found it: same names, same bytes.
    ///
    /// A read-only SQLite connection on a WAL-mode file creates the `-wal` and `-shm` files it
    /// needs but cannot remove them: only a connection that takes the database's exclusive lock
    /// when it closes checkpoints and deletes them, and a read-only descriptor cannot take it. So
    /// when no side file exists and the file and its folder are writable, the tools open the file
    /// read-write with `PRAGMA query_only` on: nothing is written through the connection, there is
    /// no journal to roll back, and closing it as the file's last connection removes the side files
    /// it made (when another connection opened the file meanwhile, they are that one's and stay).
    /// When side files exist (another connection has the file open, or a crash left them), the
    /// file is opened read-only and they are left alone: the library never deletes a `-wal` or
    /// `-journal` it did not make.
    static func forInspection(path: String, busyTimeout: Duration) -> KeyedConnections {
        let sideFiles = ["-journal", "-wal", "-shm"].contains { FileManager.default.fileExists(atPath: path + $0) }
        let writable = Foundation.access(path, W_OK) == 0 && Foundation.access(FileSystem.folder(of: path), W_OK) == 0
        guard !sideFiles, writable else { return KeyedConnections(path: path, access: .readOnly, busyTimeout: busyTimeout) }
        return KeyedConnections(path: path, access: .readWrite, busyTimeout: busyTimeout, queryOnly: true)
    }
}
