import DurableFiles
import Foundation
import KeyConfiguration
import Logging
import SQLCipherConnection

/// Everything a ``Rotation`` works with: the file, the old and new keys, the options, and the
/// steps every strategy shares — the checks before writing, the mapping of failures to
/// ``EncryptedDatabaseError``, leaving and re-entering WAL mode, and the verification on a fresh
/// connection.
struct RotationContext {
    /// The database file.
    let path: String
    /// The key the file is on.
    let from: ResolvedKey
    /// The key it is rotated to.
    let to: ResolvedKey
    let busyTimeout: Duration
    let verification: RotationVerification
    let logger: Logger
    /// The durable file-system steps (tests replace them to simulate failures and power cuts).
    let files: FileOperations
    /// Threads for the cryptography of page re-encryption.
    let workers: Int
    /// The opening database's part in the step-aside protocol (``StepAsideLock``), through which a
    /// rotation that replaces the file asks the other databases to step aside; `nil` when the
    /// lock file did not exist when the database opened (the export then looks for it again).
    var stepAside: StepAsideLock? = nil

    /// The folder that holds the file (journals and temporaries are created there).
    var folder: String { FileSystem.folder(of: path) }

    /// The file's size now, 0 when it cannot be read.
    var fileSize: Int64 { FileSystem.size(of: path) ?? 0 }

    // MARK: Failures

    /// Runs SQLite or file-system work and maps its failure to the matching error for `operation`.
    func step<T>(_ operation: String, _ body: () throws -> T) throws(EncryptedDatabaseError) -> T {
        do {
            return try body()
        } catch {
            throw failure(error, operation: operation)
        }
    }

    /// The error for a failure during `operation` on the connection keyed with ``from``. That
    /// connection opened the file and read it, so SQLite's "not a database" from it means the
    /// file is no longer on that key: another process rotated it
    /// (``EncryptedDatabaseError/changedByAnotherProcess(path:keyID:operation:)``, which the open
    /// sequence answers by probing the file again).
    func failure(_ error: any Error, operation: String) -> EncryptedDatabaseError {
        if let error = error as? SQLiteError, error.code.primary == .notADatabase {
            return .changedByAnotherProcess(path: path, keyID: from.id, operation: operation)
        }
        return EncryptedDatabaseError.from(error, path: path, operation: operation)
    }

    // MARK: Before writing

    /// Throws ``EncryptedDatabaseError/readOnly(path:reason:)`` unless the connection, the file and
    /// its folder are writable.
    func requireWritable(_ connection: Connection) throws(EncryptedDatabaseError) {
        if connection.isReadOnly {
            throw .readOnly(path: path, reason: "the file could only be opened read-only")
        }
        if access(path, W_OK) != 0 {
            throw .readOnly(path: path, reason: "the file is not writable: \(String(cString: strerror(errno)))")
        }
        if access(folder, W_OK) != 0 {
            throw .readOnly(path: path, reason: "its folder \(folder) is not writable (the rotation writes a journal or a new file there): \(String(cString: strerror(errno)))")
        }
    }

    /// Throws ``EncryptedDatabaseError/diskFull(path:detail:)`` unless the file system and the
    /// process file-size limit (`ulimit -f`) leave room for `bytes` more (plus a margin).
    func requireSpace(bytes: Int64, for what: String) throws(EncryptedDatabaseError) {
        if let shortfall = Self.spaceShortfall(bytes: bytes, in: folder, for: what) {
            throw .diskFull(path: path, detail: shortfall)
        }
    }

    /// Why the file system holding `folder` or the process file-size limit (`ulimit -f`) cannot
    /// take `bytes` more (plus a margin), or `nil` when they can.
    static func spaceShortfall(bytes: Int64, in folder: String, for what: String) -> String? {
        let needed = bytes + bytes / 16 + 64 * 1024
        if let available = FileSystem.availableBytes(at: folder), available < needed {
            return "\(what) needs about \(needed) bytes free, \(available) are available"
        }
        if let limit = FileSystem.fileSizeLimit(), limit < needed {
            return "the process file-size limit (ulimit -f) is \(limit) bytes; \(what) needs about \(needed)"
        }
        return nil
    }

    // MARK: WAL mode

    /// What ``leaveWAL(_:)`` found.
    enum WALSwitch {
        /// The file was not in WAL mode; nothing changed.
        case notWAL
        /// The file was in WAL mode and is in rollback-journal (`DELETE`) mode now.
        case left
        /// The file is in WAL mode and another connection has it open, so it cannot leave it
        /// (waiting would not help: the other connection holds it as long as it lives).
        case heldByAnotherConnection
    }

    /// Switches a WAL-mode file to rollback-journal mode, which SQLite allows only when no other
    /// connection has it open, and releases the file again: it is then a consistent
    /// rollback-journal-mode file that other processes may open.
    ///
    /// SQLite leaves WAL mode in two steps: it checkpoints and deletes the WAL under an EXCLUSIVE
    /// lock, then drops to SHARED and writes the new journal mode into page 1 in a transaction of
    /// its own. Between the two, another process can read a page 1 that still says WAL, open a
    /// new WAL and commit through it, and this connection then writes a page 1 read before those
    /// commits over them (a rotation by that process left page 1 on the old key and every other
    /// page on the new one). In exclusive locking mode SQLite keeps the EXCLUSIVE lock from
    /// before the first step until after the second, so nobody sees the file in between.
    /// - Throws: ``EncryptedDatabaseError`` when the journal mode cannot be read or set.
    func leaveWAL(_ connection: Connection) throws(EncryptedDatabaseError) -> WALSwitch {
        guard try step("reading the journal mode", { try connection.journalMode() }) == "wal" else { return .notWAL }
        let mode: String?
        do {
            try connection.execute("PRAGMA locking_mode = EXCLUSIVE")
            defer { releaseExclusiveLock(connection) }
            // A write transaction takes the EXCLUSIVE lock in this mode, and keeps it after the
            // commit. Not waiting: a connection that has the file open in WAL mode holds it for as
            // long as it lives.
            connection.setBusyTimeout(.zero)
            defer { connection.setBusyTimeout(busyTimeout) }
            try connection.execute("BEGIN IMMEDIATE")
            try connection.execute("COMMIT")
            mode = try connection.queryValue("PRAGMA journal_mode = DELETE", as: String.self)
        } catch let error as SQLiteError where error.code.primary == .busy || error.code.primary == .locked {
            return .heldByAnotherConnection
        } catch {
            throw failure(error, operation: "leaving WAL mode")
        }
        return mode?.lowercased() == "delete" ? .left : .heldByAnotherConnection
    }

    /// Back to normal locking mode; SQLite releases the lock at the end of the next access.
    private func releaseExclusiveLock(_ connection: Connection) {
        if !connection.isAutocommit { try? connection.execute("ROLLBACK") }
        try? connection.execute("PRAGMA locking_mode = NORMAL")
        _ = try? connection.queryValue("SELECT count(*) FROM sqlite_master", as: Int.self)
    }

    /// Puts a file that ``leaveWAL(_:)`` took out of WAL mode back into it; logs when it cannot.
    func restoreWAL(_ connection: Connection) {
        if !connection.isAutocommit { try? connection.execute("ROLLBACK") }
        let mode = (try? connection.queryValue("PRAGMA journal_mode = WAL", as: String.self)) ?? nil
        if mode?.lowercased() != "wal" {
            logger.warning("the file could not be put back into WAL mode; it is in rollback-journal mode now", metadata: ["path": "\(path)"])
        }
    }

    // MARK: Verification

    /// A fresh connection on the file keyed with `key`, or `nil` when SQLite says the key does not
    /// open it.
    /// - Throws: ``EncryptedDatabaseError`` for failures that say nothing about the key (busy, I/O).
    func openFresh(with key: ResolvedKey) throws(EncryptedDatabaseError) -> Connection? {
        try KeyedConnections(path: path, access: .readWrite, busyTimeout: busyTimeout).open(with: key)
    }

    /// The engine check the configured verification asks for on a fresh connection: none for
    /// ``RotationVerification/schema`` (opening proved the key), none for
    /// ``RotationVerification/pages`` when the rotation read every page back itself,
    /// `quick_check` or `integrity_check` otherwise.
    func engineCheck(pagesReadBack: Bool) -> String? {
        switch verification {
        case .schema: return nil
        case .pages: return pagesReadBack ? nil : "PRAGMA quick_check"
        case .quickCheck: return "PRAGMA quick_check"
        case .integrityCheck: return "PRAGMA integrity_check"
        }
    }

    /// Runs `check` on `connection`; returns what it reported when that is not `ok`.
    /// - Throws: `SQLiteError` when the check cannot run.
    func problems(running check: String, on connection: Connection) throws -> String? {
        let result = try connection.query(check).compactMap { try $0.get(0, as: String?.self) }
        return result == ["ok"] ? nil : "\(check) reported: \(result.prefix(3).joined(separator: "; "))"
    }

    /// A report of a finished rotation.
    func report(method: RotationMethod, journalMode: String, bytes: Int64, rewrite: Duration, verify: Duration, since start: Stopwatch) -> RotationReport {
        RotationReport(
            fromKeyID: from.id, toKeyID: to.id, journalMode: journalMode, bytes: bytes,
            rekeyDuration: rewrite, verifyDuration: verify, verification: verification,
            totalDuration: start.elapsed, method: method)
    }
}
