import Foundation

/// The header of a WAL-mode database's wal-index (its `-shm` file): the first 48 bytes, which
/// SQLite rewrites at every commit (frame count, change counter) and at every reset of the WAL
/// (new salts), as SQLite's file-format document describes. Two equal reads mean that nobody
/// committed or reset the WAL in between, also when the commits were checkpointed and the `-wal`
/// emptied since.
///
/// It reads through a descriptor of its own, and closing a descriptor drops every POSIX lock the
/// process holds on that file, SQLite's shm locks included: ``close()`` only once this process has
/// no connection to the database, else ``keepUntilExit()``.
package final class WALIndexHeader {
    private var descriptor: Int32
    /// The header as first read; `nil` when the file could not be read.
    package let first: [UInt8]?

    /// Opens `databasePath` + `-shm` and reads its header; `nil` when there is no such file.
    package init?(databasePath: String) {
        let descriptor = open(databasePath + "-shm", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        self.descriptor = descriptor
        first = Self.read(descriptor)
    }

    deinit { keepUntilExit() }

    private static func read(_ descriptor: Int32) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: 48)
        let count = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, 48, 0) }
        return count == 48 ? bytes : nil
    }

    /// Whether the header differs from ``first`` now (or either read failed).
    package func changed() -> Bool {
        guard let first, descriptor >= 0, let now = Self.read(descriptor) else { return true }
        return first != now
    }

    /// Closes the descriptor. Only when this process has no connection to the database.
    package func close() {
        guard descriptor >= 0 else { return }
        _ = Foundation.close(descriptor)
        descriptor = -1
    }

    /// Keeps the descriptor open until the process ends (see ``SoleUseLease/Gate/keepOpen()``).
    package func keepUntilExit() {
        guard descriptor >= 0 else { return }
        KeptDescriptors.shared.withLock { $0.append(descriptor) }
        descriptor = -1
    }
}
