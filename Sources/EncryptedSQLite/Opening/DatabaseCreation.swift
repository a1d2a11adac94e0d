import Foundation
import Logging

/// Creates a new encrypted database without ever leaving a 0-byte or half-made file at the
/// target path: the database is built under a temporary name in the same folder, made durable,
/// and then linked into place, which fails rather than replaces if the path appeared meanwhile.
struct DatabaseCreation {
    let path: String
    let key: ResolvedKey
    let busyTimeout: Duration
    let logger: Logger

    /// Creates the file. Returns `false` when another process created it first (the caller then
    /// opens it like any existing file).
    func run() throws(EncryptedDatabaseError) -> Bool {
        let folder = FileSystem.folder(of: path)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw .fileNotFound(path: path)
        }
        let name = URL(fileURLWithPath: path).lastPathComponent
        let temporary = folder + "/.\(name).\(UUID().uuidString.prefix(8)).creating"
        defer { FileSystem.removeIfPresent(temporary) }
        do {
            let connection = try Connection(path: temporary, access: .readWrite, create: true, key: key.material, cipher: key.cipher, busyTimeout: busyTimeout)
            // SQLite writes nothing until the first change: make it write page 1 now.
            try connection.execute("PRAGMA user_version = 0")
            try connection.execute("BEGIN IMMEDIATE; CREATE TABLE __encryptedsqlite_init(x); DROP TABLE __encryptedsqlite_init; COMMIT")
            try connection.verifyReadable()
            connection.close()
        } catch let error as SQLiteError {
            throw EncryptedDatabaseError.from(error, path: path, operation: "creating the database")
        } catch {
            throw .ioFailure(path: path, operation: "creating the database", detail: "\(error)")
        }
        do {
            try FileSystem.fsync(path: temporary)
            do {
                try FileSystem.linkWithoutReplacing(temporary, to: path)
            } catch where error.code == EEXIST {
                logger.info("database appeared while it was being created; opening it instead", metadata: ["path": "\(path)"])
                return false
            }
            FileSystem.removeIfPresent(temporary)
            try FileSystem.fsyncDirectory(folder)
        } catch {
            if error.code == EACCES || error.code == EPERM || error.code == EROFS {
                throw .readOnly(path: path, reason: error.description)
            }
            throw .ioFailure(path: path, operation: "creating the database", detail: error.description)
        }
        logger.info("created encrypted database", metadata: ["path": "\(path)", "key": "\(key.id)"])
        return true
    }
}
