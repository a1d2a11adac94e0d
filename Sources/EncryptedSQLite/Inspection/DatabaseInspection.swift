import CipherFormats
import DurableFiles
import Foundation
import KeyConfiguration
import SQLCipherConnection

/// A database file's state, read without changing anything.
///
/// ```swift
/// let state = try DatabaseInspection.state(path: "app.sqlite", keys: keys)
/// if state.needsRotation { print("\(state.path) is on \(state.openedWithKeyID), not \(state.currentKeyID)") }
/// ```
public struct DatabaseState: Sendable, Equatable, Codable {
    /// The database path.
    public let path: String
    /// The file's size in bytes.
    public let bytes: Int64
    /// `true` for an unencrypted SQLite file.
    public let plaintext: Bool
    /// The id of the key (or plaintext entry) that opens the file.
    public let openedWithKeyID: String
    /// The id of the current key.
    public let currentKeyID: String
    /// `true` when the file is not on the current key and its settings.
    public let needsRotation: Bool
    /// How a rotation would rewrite the file (`nil` when none is needed).
    public let rotationMethod: RotationMethod?
    /// The journal mode (`delete`, `wal`, …).
    public let journalMode: String
    /// The page size in bytes.
    public let pageSize: Int
    /// The number of pages.
    public let pageCount: Int
    /// PBKDF2 iterations of the settings that opened the file (`nil` for plaintext).
    public let kdfIterations: Int?
    /// Whether pages carry an HMAC (`nil` for plaintext).
    public let useHMAC: Bool?
    /// Every setting of the format that opened the file, e.g. `kdf_iter 256000 (sha512),
    /// page_size 4096, hmac sha512` (`nil` for plaintext).
    public let format: String?
    /// `true` when the key that opened the file is marked legacy (SQLCipher 1.x/2.x).
    public let legacy: Bool
    /// `PRAGMA user_version`.
    public let userVersion: Int32
    /// `PRAGMA application_id`.
    public let applicationID: Int32
    /// SQLite side files next to the database (`-journal`, `-wal`, `-shm`) that existed before
    /// the inspection (another connection's, or a crash's).
    public let sideFiles: [String]
    /// The linked SQLCipher version.
    public let engineVersion: String
}

/// Read-only tools over one database file: its state, a SQL dump, and a decrypted copy. None of
/// them writes to the database; each opens it with the key list (trying keys as
/// ``EncryptedDatabase`` does), writes nothing through that connection, never rotates it, and
/// leaves the database's folder as it found it: `-wal` and `-shm` files that a WAL-mode file
/// needs while it is read are removed when done, unless they existed before.
///
/// ```swift
/// let keys = try KeysFile.load(path: "Keys").keyList(forDatabase: "app.sqlite")
/// let state = try DatabaseInspection.state(path: "app.sqlite", keys: keys)
/// print(state.openedWithKeyID, state.needsRotation)
/// ```
public enum DatabaseInspection {
    /// Which key opens the file and its journal mode, page size and count, KDF iterations, size
    /// and other facts, without changing it.
    /// - Throws: ``EncryptedDatabaseError`` as for opening (missing, no key opens it, …).
    public static func state(path: String, keys: KeyList, busyTimeout: Duration = .seconds(5)) throws(EncryptedDatabaseError) -> DatabaseState {
        let sideFiles = ["-journal", "-wal", "-shm"].filter { FileManager.default.fileExists(atPath: path + $0) }
        let outcome = try probe(path: path, keys: keys, busyTimeout: busyTimeout)
        defer { outcome.connection.close() }
        let key = outcome.key
        let onCurrent = keys.isCurrent(key)
        do {
            let db = outcome.connection
            let settings = key.cipher.effective
            return DatabaseState(
                path: path, bytes: FileSystem.size(of: path) ?? 0, plaintext: key.isPlaintext,
                openedWithKeyID: key.id, currentKeyID: keys.currentID, needsRotation: !onCurrent,
                rotationMethod: onCurrent ? nil : RotationPlan(from: key, to: keys.current, strategy: .automatic).method,
                journalMode: try db.journalMode(),
                pageSize: try db.integerPragma("page_size") ?? 0,
                pageCount: try db.integerPragma("page_count") ?? 0,
                kdfIterations: key.isPlaintext ? nil : settings.kdfIterations,
                useHMAC: key.isPlaintext ? nil : settings.useHMAC,
                format: key.isPlaintext ? nil : key.cipher.format().description,
                legacy: key.legacy,
                userVersion: try db.userVersion(), applicationID: try db.applicationID(),
                sideFiles: sideFiles,
                engineVersion: SQLCipherEngine.linked.version)
        } catch {
            throw .ioFailure(path: path, operation: "reading the database's state", detail: "\(error)")
        }
    }

    /// Writes the database as SQL text (see ``DatabaseDump``) to `output`, line by line.
    /// - Throws: ``EncryptedDatabaseError`` as for opening, or when a read fails; whatever `output` throws.
    public static func dump(path: String, keys: KeyList, busyTimeout: Duration = .seconds(5), to output: (String) throws -> Void) throws {
        let outcome = try probe(path: path, keys: keys, busyTimeout: busyTimeout)
        defer { outcome.connection.close() }
        do {
            try outcome.connection.execute("BEGIN")  // one consistent snapshot
            try DatabaseDump.write(outcome.connection, to: output)
            try outcome.connection.execute("COMMIT")
        } catch let error as SQLiteError {
            throw EncryptedDatabaseError.from(error, path: path, operation: "dumping the database")
        }
    }

    /// Writes an unencrypted copy of the database to `target`, a new file: built under a temporary
    /// name in `target`'s folder, verified (same schema, row counts, `user_version`,
    /// `application_id`, `quick_check`), fsynced, and linked into place without ever replacing an
    /// existing file. The copy holds the data in the clear: keep it somewhere safe and delete it
    /// when done.
    /// - Throws: ``EncryptedDatabaseError/targetExists(path:)`` when `target` exists, or as for opening.
    public static func decryptedCopy(path: String, keys: KeyList, to target: String, busyTimeout: Duration = .seconds(5)) throws(EncryptedDatabaseError) {
        try decryptedCopy(path: path, keys: keys, to: target, busyTimeout: busyTimeout, files: .system)
    }

    /// ``decryptedCopy(path:keys:to:busyTimeout:)`` through the file steps `files` (the seam the
    /// rotations and backups use; tests alter the copy there, before it is verified).
    static func decryptedCopy(path: String, keys: KeyList, to target: String, busyTimeout: Duration, files: FileOperations) throws(EncryptedDatabaseError) {
        guard case .missing = DatabaseFileKind.inspect(path: target) else { throw .targetExists(path: target) }
        let outcome = try probe(path: path, keys: keys, busyTimeout: busyTimeout)
        defer { outcome.connection.close() }
        let facts: DatabaseExport.SourceFacts
        do {
            try outcome.connection.execute("BEGIN")  // hold a read snapshot while copying
            facts = try DatabaseExport.SourceFacts(outcome.connection, journalMode: outcome.connection.journalMode())
        } catch {
            throw .ioFailure(path: path, operation: "reading the database", detail: "\(error)")
        }
        let copy = try RotationTemporaries.create(for: target, suffix: RotationTemporaries.exportSuffix, files: files,
                                                  reported: target, operation: "creating the temporary file")
        let temporary = copy.temporaryPath
        defer { copy.close() }
        let plaintext = ResolvedKey(id: "plaintext copy", material: nil)
        let exporter = DatabaseExport(path: path, busyTimeout: busyTimeout)
        try exporter.export(from: outcome.key, to: plaintext, into: temporary, original: facts, walMode: false)
        files.written(temporary)
        try exporter.verify(temporary, key: plaintext, against: facts, check: "PRAGMA quick_check",
                            copy: "the decrypted copy", outcome: "nothing was written under \(target)")
        do {
            try copy.publish(as: target, replacing: false)
        } catch .targetExists {
            throw .targetExists(path: target)
        } catch {
            throw .ioFailure(path: target, operation: "writing the decrypted copy", detail: error.description)
        }
    }

    private static func probe(path: String, keys: KeyList, busyTimeout: Duration) throws(EncryptedDatabaseError) -> KeyProbe.Outcome {
        try KeyProbe(keys: keys, trial: KeyedConnections.forInspection(path: path, busyTimeout: busyTimeout)).run()
    }
}
