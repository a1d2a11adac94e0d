import Foundation
import SQLCipherConnection

/// What a path holds, judged from the file system and the first bytes only (read through SQLite's
/// file layer without a key; nothing is written).
///
/// ```swift
/// if case .plaintextSQLite = DatabaseFileKind.inspect(path: "app.sqlite") {
///     print("app.sqlite is not encrypted yet")
/// }
/// ```
public enum DatabaseFileKind: Sendable, Equatable, CustomStringConvertible {
    /// Nothing exists at the path.
    case missing
    /// Something exists but is not a regular file (a directory, a socket…).
    case notARegularFile(kind: String)
    /// The file exists but cannot be read.
    case unreadable(reason: String)
    /// A 0-byte file. SQLite would accept any key for it, so the library refuses it.
    case empty
    /// Too short to hold even one database page.
    case tooShort(bytes: Int)
    /// An unencrypted SQLite database (starts with `SQLite format 3\0`).
    case plaintextSQLite(bytes: Int)
    /// Anything else: an encrypted database, or random bytes; only a key can tell.
    case opaque(bytes: Int)

    /// The smallest SQLite page (and so the smallest database file).
    static let minimumDatabaseSize = 512
    /// The 16-byte header of every unencrypted SQLite database.
    static let plaintextHeader = Array("SQLite format 3".utf8) + [0]

    /// Looks at `path` without changing it.
    public static func inspect(path: String) -> DatabaseFileKind {
        inspect(path: path, headerFrom: nil)
    }

    /// ``inspect(path:)``, reading the first bytes through `connection` when one is given: a
    /// connection already open on `path` (keyed or not, nothing read through SQLite yet), whose
    /// file SQLite opened; its own descriptor is used, so no descriptor of the file is opened and
    /// closed here and no raw connection is opened for the read. `nil` opens a raw one.
    package static func inspect(path: String, headerFrom connection: Connection?) -> DatabaseFileKind {
        var status = stat()
        guard stat(path, &status) == 0 else {
            return errno == ENOENT || errno == ENOTDIR ? .missing : .unreadable(reason: String(cString: strerror(errno)))
        }
        switch status.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: return .notARegularFile(kind: "directory")
        case S_IFIFO: return .notARegularFile(kind: "named pipe")
        case S_IFSOCK: return .notARegularFile(kind: "socket")
        case S_IFCHR, S_IFBLK: return .notARegularFile(kind: "device")
        default: return .notARegularFile(kind: "special file")
        }
        let size = Int(status.st_size)
        if size == 0 { return .empty }
        // Through SQLite's file layer: a descriptor of our own, once closed, would drop the locks
        // of this process's open connections to the file (DatabaseFilePrefix).
        let header: [UInt8]
        switch connection.map({ DatabaseFilePrefix.read(from: $0, count: 16) }) ?? DatabaseFilePrefix.read(path, count: 16) {
        case .success(let bytes): header = bytes
        case .failure(let failure): return .unreadable(reason: failure.reason)
        }
        if header == plaintextHeader {
            return size < minimumDatabaseSize ? .tooShort(bytes: size) : .plaintextSQLite(bytes: size)
        }
        return size < minimumDatabaseSize ? .tooShort(bytes: size) : .opaque(bytes: size)
    }

    /// A short description such as `an unencrypted SQLite database (8192 bytes)`.
    public var description: String {
        switch self {
        case .missing: return "no such file"
        case .notARegularFile(let kind): return "not a regular file (\(kind))"
        case .unreadable(let reason): return "unreadable (\(reason))"
        case .empty: return "an empty file"
        case .tooShort(let bytes): return "too short to be a database (\(bytes) bytes)"
        case .plaintextSQLite(let bytes): return "an unencrypted SQLite database (\(bytes) bytes)"
        case .opaque(let bytes): return "an encrypted or unknown file (\(bytes) bytes)"
        }
    }
}
