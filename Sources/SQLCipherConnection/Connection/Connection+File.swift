import CSQLCipher
import DurableFiles
import Foundation

extension Connection {
    /// SQLite's own handle of this connection's main database file, for reading and writing raw
    /// (encrypted) pages while the connection holds the database's lock.
    ///
    /// Why not a second descriptor: SQLite's locks are POSIX `fcntl` locks, which the kernel drops
    /// for the whole process as soon as *any* descriptor of the file is closed. Reading and
    /// writing through the connection's own `sqlite3_file` opens and closes nothing.
    ///
    /// The handle is valid while the connection is open; nothing may be written through it unless
    /// the connection holds the EXCLUSIVE lock.
    /// - Throws: ``SQLiteError`` when SQLite has no file for the main database.
    package func mainDatabaseFile() throws -> any RandomAccessFile {
        var file: UnsafeMutablePointer<sqlite3_file>?
        let code = sqlite3_file_control(handle, "main", SQLITE_FCNTL_FILE_POINTER, &file)
        guard code == SQLITE_OK, let file, file.pointee.pMethods != nil else {
            throw error(code: code == SQLITE_OK ? SQLITE_NOTFOUND : code, sql: nil)
        }
        return SQLiteFileHandle(file: file, path: path, owner: self)
    }
}

/// A `sqlite3_file` of an open connection, used through its VFS methods (`xRead`, `xWrite`,
/// `xSync`, `xFileSize`). The unix VFS implements reads and writes with `pread`/`pwrite`, so
/// distinct ranges can be read and written from several threads at once.
final class SQLiteFileHandle: RandomAccessFile, @unchecked Sendable {
    let path: String
    // Invariant: `file` stays valid while `owner` is open; the handle never outlives the rotation
    // that holds the connection.
    private let file: UnsafeMutablePointer<sqlite3_file>
    private let owner: Connection

    init(file: UnsafeMutablePointer<sqlite3_file>, path: String, owner: Connection) {
        self.file = file
        self.path = path
        self.owner = owner
    }

    private var methods: sqlite3_io_methods { file.pointee.pMethods.pointee }

    /// `SQLITE_IOERR_SHORT_READ` (a macro Swift does not import).
    private static let shortRead = SQLITE_IOERR | (2 << 8)

    /// The largest transfer the unix VFS accepts: it moves single pages and masks a write's
    /// length with 0x1ffff, so larger reads and writes are split into pieces of this size.
    static let maximumTransfer = 64 * 1024

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(FileSystemError) -> Int {
        var done = 0
        while done < buffer.count {
            let count = min(Self.maximumTransfer, buffer.count - done)
            let code = methods.xRead(file, buffer.baseAddress! + done, Int32(count), offset + Int64(done))
            if code == Self.shortRead {
                // SQLite zero-fills the rest; report how much of the file there was.
                let size = try self.size()
                return Int(max(0, min(Int64(buffer.count), size - offset)))
            }
            guard code == SQLITE_OK else { throw .failed(operation: "read \(path) (SQLite I/O error \(code))", errno: EIO) }
            done += count
        }
        return done
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(FileSystemError) {
        var done = 0
        while done < bytes.count {
            let count = min(Self.maximumTransfer, bytes.count - done)
            let code = methods.xWrite(file, bytes.baseAddress! + done, Int32(count), offset + Int64(done))
            guard code == SQLITE_OK else {
                let errorNumber: Int32 = code == SQLITE_FULL ? ENOSPC : EIO
                throw .failed(operation: "write \(path) (SQLite I/O error \(code))", errno: errorNumber)
            }
            done += count
        }
    }

    func synchronize() throws(FileSystemError) {
        let code = methods.xSync(file, SQLITE_SYNC_FULL)
        guard code == SQLITE_OK else { throw .failed(operation: "fsync \(path) (SQLite I/O error \(code))", errno: EIO) }
    }

    func size() throws(FileSystemError) -> Int64 {
        var size: sqlite3_int64 = 0
        let code = methods.xFileSize(file, &size)
        guard code == SQLITE_OK else { throw .failed(operation: "size of \(path) (SQLite I/O error \(code))", errno: EIO) }
        return size
    }

    /// The connection owns the file; closing the connection closes it.
    func close() {}
}
