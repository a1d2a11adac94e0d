import DurableFiles
import Foundation
import KeyConfiguration
import Logging
import SQLCipherConnection

/// Creates a new encrypted database without ever leaving a 0-byte or half-made file at the
/// target path: the database is built under a temporary name in the same folder
/// (`.<name>.<8 hex>.rekey-create`, held with a `flock` while it lives), made durable, and then
/// linked into place, which fails rather than replaces if the path appeared meanwhile. A temporary
/// left by a killed process is removed by the next open (``RotationTemporaries``). The file is
/// owner-only (`0600` narrowed by the umask, see `FileSystem.newFileMode`), and so are the
/// journals SQLite makes beside it.
struct DatabaseCreation {
    let path: String
    let key: ResolvedKey
    let busyTimeout: Duration
    let logger: Logger
    var files: FileOperations = .system

    /// Creates the file. Returns `false` when another process created it first (the caller then
    /// opens it like any existing file).
    /// - Throws: ``EncryptedDatabaseError``. A failure up to the link leaves neither the target nor
    ///   the temporary. A failure to flush the folder comes after the link: the complete database is
    ///   then in place and the temporary gone, but the error is thrown all the same, since the new
    ///   name might not survive a power cut; the next open opens the file like any existing one.
    func run() throws(EncryptedDatabaseError) -> Bool {
        let folder = FileSystem.folder(of: path)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw .fileNotFound(path: path)
        }
        // SQLite treats the empty file as a new database; the lock marks it as ours while we live.
        let file = try RotationTemporaries.create(for: path, suffix: RotationTemporaries.createSuffix, files: files,
                                                  reported: path, operation: "creating the database as")
        defer { file.close() }
        do {
            let connection = try KeyedConnections(path: file.temporaryPath, access: .readWrite, busyTimeout: busyTimeout).connect(key, create: true)
            // SQLite writes nothing until the first change: make it write page 1 now.
            try connection.execute("PRAGMA user_version = 0")
            try connection.execute("BEGIN IMMEDIATE; CREATE TABLE __encryptedsqlite_init(x); DROP TABLE __encryptedsqlite_init; COMMIT")
            try connection.verifyReadable()
            connection.close()
        } catch {
            throw EncryptedDatabaseError.from(error, path: path, operation: "creating the database")
        }
        do {
            try file.publish(as: path, replacing: false)
        } catch .targetExists {
            logger.info("database appeared while it was being created; opening it instead", metadata: ["path": "\(path)"])
            return false
        } catch {
            throw EncryptedDatabaseError.from(error, path: path, operation: "creating the database")
        }
        logger.info("created encrypted database", metadata: ["path": "\(path)", "key": "\(key.id)"])
        return true
    }
}
