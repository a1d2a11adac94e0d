import CipherFormats
import DatabaseMigrations
import DurableFiles
import Foundation
import KeyConfiguration
import SQLCipherConnection

/// Why a database could not be opened, rotated or created.
///
/// Each case names the file, and where keys are involved the key ids; none ever contains key
/// material. ``description`` says what happened and what to do; ``category`` groups the cases for
/// programs that map them to exit codes or retries.
///
/// ```swift
/// do {
///     _ = try EncryptedDatabase(path: "app.sqlite", keysFile: "Keys")
/// } catch let error as EncryptedDatabaseError {
///     if case .noKeyOpens(let path, let tried, _) = error { print("no key of \(tried) opens \(path)") }
///     print(error.description)  // names the file and key ids, never key material
/// }
/// ```
public enum EncryptedDatabaseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No file exists at the path, and creating one was not allowed.
    case fileNotFound(path: String)
    /// The path is a directory or another non-regular file.
    case notARegularFile(path: String, kind: String)
    /// The file or its folder cannot be read.
    case permissionDenied(path: String, reason: String)
    /// The file is 0 bytes long. SQLite would accept any key for it, so it is refused.
    case emptyFile(path: String)
    /// The file is shorter than one database page.
    case fileTooShort(path: String, bytes: Int)
    /// The file is an unencrypted SQLite database.
    case plaintextDatabase(path: String)
    /// None of the configured keys opens the file. `hexLikePassphraseKeyIDs` names the tried
    /// keys that are read as passphrases but are exactly 64 hex digits, as a raw key is written
    /// (a key file or environment variable without `format: hex`); the description then suggests
    /// `format: hex`.
    case noKeyOpens(path: String, triedKeyIDs: [String], hexLikePassphraseKeyIDs: [String] = [])
    /// The file is in SQLCipher 4's default format, and key `keyID` is the right key for it
    /// (checked against the file's salt and page-1 HMAC), but no configured setting opens it: on
    /// SQLCipher 3 the engine cannot read that format; on SQLCipher 4 the key's `cipher:` settings
    /// name another format.
    case sqlcipher4File(path: String, keyID: String, triedKeyIDs: [String])
    /// The target of an export or decrypted copy already exists; it is never overwritten.
    case targetExists(path: String)
    /// Another connection or process holds a lock on the database for longer than the busy timeout.
    case busy(path: String, detail: String)
    /// The file needs a write (rotation, creation) but the file or its folder cannot be written.
    case readOnly(path: String, reason: String)
    /// The file needs rotation to the current key, but the database was opened read-only.
    case rotationNeeded(path: String, openedWith: String, currentKeyID: String)
    /// A write was interrupted (a process ended inside a transaction or a rotation) and its
    /// rollback journal must be rolled back before the file can be read; a read-only open
    /// (`check`, `rekey --check`, `status`) cannot do that. A read-write open does it.
    case interruptedWrite(path: String)
    /// A rotation did not take effect (SQLCipher reported success but the file is still on the old
    /// key). Nothing was lost: the file still opens with `fromKeyID`.
    case rotationNotApplied(path: String, fromKeyID: String, toKeyID: String, detail: String)
    /// After a rotation, the file failed verification with the new key.
    case verificationFailed(path: String, keyID: String, detail: String)
    /// The disk or a file-size limit is full.
    case diskFull(path: String, detail: String)
    /// Any other SQLite or file-system failure.
    case ioFailure(path: String, operation: String, detail: String)
    /// The migrator given to the open refused the database or a migration failed; the database
    /// is at the last migration that succeeded.
    case migrationFailed(path: String, MigrationError)
    /// While this process worked on the file with key `keyID` (`operation`), another process
    /// rotated it to another key. Nothing was changed; opening the file again finds the key it is
    /// on now. An ``EncryptedDatabase`` does that by itself within its busy timeout, so this
    /// reaches callers only when rotations kept coming for longer than that.
    case changedByAnotherProcess(path: String, keyID: String, operation: String)
    /// The key the file is on cannot be obtained by this process: its key list (the Keys file or
    /// key provider it was opened from) could not be read, or lacks the key another process rotated
    /// the file to. `reason` says which, and what to do.
    case keyUnavailable(path: String, reason: String)
    /// An async access waited `waited` for the writer (``OpenOptions/writerWaitLimit``, or the
    /// call's own limit) while something else held it: a rotation, a migration, a long write.
    /// Nothing was done; try again later (an HTTP service answers 503).
    case writerWaitExpired(path: String, waited: Duration)
    /// The database was closed (``EncryptedDatabase/close()``): open it again to use it.
    case closed(path: String)
    /// A ``WriteSession`` was used after its ``EncryptedDatabase/writeTransaction(waitingAtMost:_:)``
    /// body ended: use it only inside the body.
    case transactionEnded(path: String)

    /// Groups of errors that call for the same reaction.
    public enum Category: String, Sendable, Codable {
        /// The database file is missing.
        case missingFile
        /// The file is there but is not an encrypted database any configured key opens.
        case unreadableContent
        /// Permissions or read-only state stop the operation.
        case permission
        /// The database is locked; try again later.
        case busy
        /// Reading or writing failed (I/O, disk full, verification).
        case io
        /// A check found that the file needs rotation.
        case needsRotation
        /// A migration was refused or failed.
        case migration
        /// The key list could not be read, or lacks the key the file is on now: fix the Keys file
        /// or key provider (or restart the process, for a key it could not see).
        case keyConfiguration
        /// The database (or the transaction) was closed before the call: a program error, not
        /// the file's.
        case closed
    }

    /// The group this error belongs to.
    public var category: Category {
        switch self {
        case .fileNotFound: return .missingFile
        case .notARegularFile, .emptyFile, .fileTooShort, .plaintextDatabase, .noKeyOpens, .sqlcipher4File: return .unreadableContent
        case .targetExists: return .permission
        case .permissionDenied, .readOnly: return .permission
        case .busy, .changedByAnotherProcess, .writerWaitExpired: return .busy
        case .closed, .transactionEnded: return .closed
        case .keyUnavailable: return .keyConfiguration
        case .rotationNeeded, .interruptedWrite: return .needsRotation
        case .rotationNotApplied, .verificationFailed, .diskFull, .ioFailure: return .io
        case .migrationFailed: return .migration
        }
    }

    /// The database path the error is about.
    public var path: String {
        switch self {
        case let .fileNotFound(path), let .notARegularFile(path, _), let .permissionDenied(path, _),
             let .emptyFile(path), let .fileTooShort(path, _), let .plaintextDatabase(path),
             let .noKeyOpens(path, _, _), let .sqlcipher4File(path, _, _), let .targetExists(path),
             let .busy(path, _), let .readOnly(path, _),
             let .rotationNeeded(path, _, _), let .interruptedWrite(path), let .rotationNotApplied(path, _, _, _),
             let .verificationFailed(path, _, _), let .diskFull(path, _), let .ioFailure(path, _, _),
             let .migrationFailed(path, _), let .changedByAnotherProcess(path, _, _), let .keyUnavailable(path, _),
             let .writerWaitExpired(path, _), let .closed(path), let .transactionEnded(path):
            return path
        }
    }

    /// What happened, to which file, with which key ids, and what to do.
    public var description: String {
        switch self {
        case .fileNotFound(let path):
            return "\(path): no such file; check the path, or allow creation (createIfMissing) to make a new encrypted database"
        case let .notARegularFile(path, kind):
            return "\(path): not a database file but a \(kind); give the path of the database file itself. Nothing was changed."
        case let .permissionDenied(path, reason):
            return "\(path): permission denied (\(reason)); check the file's and its folder's owner and mode"
        case .emptyFile(let path):
            return "\(path): the file is empty (0 bytes), which SQLite would accept with any key; if it is a leftover, delete it and create the database again"
        case let .fileTooShort(path, bytes):
            return "\(path): only \(bytes) bytes, too short to be a database (at least 512); it is damaged or not a database: check the path, or restore the file from a backup. Nothing was changed."
        case .plaintextDatabase(let path):
            return "\(path): this is an unencrypted SQLite database and its key list has no plaintext entry; to encrypt it to the current key on the next open, add `plaintext: true` as the first (oldest) key entry in the Keys file (or DatabaseKey.plaintext(id:) first in the key list). Nothing was changed."
        case let .noKeyOpens(path, tried, hexLike):
            let names = hexLike.map { "\"\($0)\"" }.joined(separator: ", ")
            let hint = switch hexLike.count {
            case 0: ""
            case 1: " Key \(names) is read as a passphrase but holds exactly 64 hex digits, like a raw key: if it is one, add `format: hex` to its entry in the Keys file (`format: .hex` in a KeySource)."
            default: " Keys \(names) are read as passphrases but hold exactly 64 hex digits, like raw keys: if they are, add `format: hex` to their entries in the Keys file (`format: .hex` in a KeySource)."
            }
            return "\(path): none of the configured keys opens this file (tried: \(tried.joined(separator: ", ")))." + hint + " Either the key list lacks the key it was written with, or a key's cipher settings do not match the file's format, or the file is damaged" + SQLCipherEngine.linked.unreadableFormatsNote + ". Add the key it was written with to its key list (with `legacy: true` for a SQLCipher 1.x/2.x file, `cipher:` for other settings), or restore the file from a backup. Nothing was changed."
        case let .sqlcipher4File(path, keyID, tried):
            return "\(path): " + SQLCipherEngine.linked.sqlcipher4FileAdvice(keyID: keyID) + " Tried: \(tried.joined(separator: ", ")). Nothing was changed."
        case .targetExists(let path):
            return "\(path): already exists; it is never overwritten. Choose a new path or remove the file yourself."
        case let .busy(path, detail):
            return "\(path): the database is locked by another connection or process (\(detail)); try again when it is idle, or raise the busy timeout. Nothing was changed."
        case let .readOnly(path, reason):
            return "\(path): cannot write (\(reason)); rotation and creation need write access to the file and its folder. Nothing was changed."
        case let .rotationNeeded(path, openedWith, current):
            return "\(path): opened with key \"\(openedWith)\", not the current key \"\(current)\"; open it read-write (or run rekey) to rotate it"
        case .interruptedWrite(let path):
            return "\(path): a write was interrupted (a process ended inside a transaction or a rotation); its journal \(path)-journal holds the pages that make the file whole again, and only a read-write open can roll it back, which a read-only open or a check cannot do. Open it once read-write, as a user who can write the file and its folder (`rekey --db \(path)`, or the app's next open), then check again. Do not delete the -journal file. Nothing was changed."
        case let .rotationNotApplied(path, from, to, detail):
            return "\(path): the rotation from key \"\(from)\" to \"\(to)\" did not take effect (\(detail)); the file still opens with \"\(from)\" and nothing was lost. Check free disk space, permissions and locks, then try again."
        case let .verificationFailed(path, keyID, detail):
            return "\(path): the rotation to key \"\(keyID)\" failed verification (\(detail)). Keep every -journal and -wal file next to the database (SQLite needs them to recover), open it again with the full key list, and report this."
        case let .diskFull(path, detail):
            return "\(path): the disk or file-size limit is full (\(detail)); free space (a rotation needs room for a journal as large as the database) and try again. Nothing was lost."
        case let .ioFailure(path, operation, detail):
            return "\(path): \(operation) failed: \(detail); check the disk, the file and its folder, then try again"
        case let .migrationFailed(path, error):
            return "\(path): \(error)"
        case let .changedByAnotherProcess(path, keyID, operation):
            return "\(path): \(operation) found the file no longer on key \"\(keyID)\": another process rotated it meanwhile, and kept doing so for longer than the busy timeout. Nothing was changed; try again (the file opens with the key it is on now)."
        case let .keyUnavailable(path, reason):
            return "\(path): \(reason)"
        case let .writerWaitExpired(path, waited):
            return "\(path): waited \(Int((waited / .milliseconds(1)).rounded())) ms for the writer, which a rotation, a migration or another write still held; nothing was done. Try again later, or raise the wait limit (OpenOptions.writerWaitLimit)."
        case .closed(let path):
            return "\(path): the database was closed (EncryptedDatabase.close()); open it again to use it"
        case .transactionEnded(let path):
            return "\(path): a WriteSession was used after its writeTransaction body ended; use it only inside the body"
        }
    }
}

extension EncryptedDatabaseError {
    /// Maps a failure during `operation` on the database at `path` to the matching case: the one
    /// place where SQLite result codes and `errno` values become these errors. An
    /// `EncryptedDatabaseError` passes through unchanged.
    static func from(_ error: any Error, path: String, operation: String) -> EncryptedDatabaseError {
        switch error {
        case let error as EncryptedDatabaseError:
            return error
        case let error as SQLiteError:
            switch error.code.primary {
            case .busy, .locked: return .busy(path: path, detail: error.message)
            // Another connection held the WAL's locks through SQLite's own retries (a recovery or
            // a checkpoint that stalled): the file is in use, not damaged (StartupDuringRotationTests).
            case .lockingProtocol: return .busy(path: path, detail: "another connection held the WAL's locks while SQLite retried for about 10 s (\(error.message))")
            // A hot journal that this connection may not roll back (read-only): not a read-only
            // file (PausePointKillTests: `rekey --check` after a kill inside a rotation).
            case .readOnly where error.code == .readOnlyRollback: return .interruptedWrite(path: path)
            case .readOnly: return .readOnly(path: path, reason: error.message)
            case .permission, .cannotOpen: return .permissionDenied(path: path, reason: error.message)
            case .full: return .diskFull(path: path, detail: error.message)
            default: return .ioFailure(path: path, operation: operation, detail: error.description)
            }
        case let error as FileSystemError:
            switch error.code {
            case ENOSPC, EDQUOT, EFBIG: return .diskFull(path: path, detail: "\(operation): \(error.description)")
            case EACCES, EPERM, EROFS: return .readOnly(path: path, reason: "\(operation): \(error.description)")
            default: return .ioFailure(path: path, operation: operation, detail: error.description)
            }
        case let error as PublishFailure:
            if let failure = error.fileSystemError { return from(failure, path: path, operation: operation) }
            return .ioFailure(path: path, operation: operation, detail: "a file appeared under the name it was to be given")
        default:
            return .ioFailure(path: path, operation: operation, detail: "\(error)")
        }
    }
}

extension EncryptedDatabaseError: LocalizedError {
    /// The same text as ``description``, so that `localizedDescription` says what happened and what
    /// to do.
    public var errorDescription: String? { description }
}
