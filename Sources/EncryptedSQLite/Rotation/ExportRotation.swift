import DurableFiles
import Foundation
import KeyConfiguration
import Logging
import SQLCipherConnection

/// Rewrites a database into a new file with another key and/or other cipher settings, verifies the
/// new file, and swaps it in atomically: the path to encrypting a plaintext database, upgrading a
/// SQLCipher 1.x/2.x file, and changing `kdf_iter`, page size or HMAC, none of which an in-place
/// rekey can do (SQLCipher 3.4.1's rekey returns OK and changes nothing for a plaintext file or a
/// new page size).
///
/// The steps, each of which leaves either the complete original or the complete new file at the
/// path (a `kill -9` or power loss at any instant included):
/// 1. Pre-flight: file and folder writable, free space and the file-size limit allow a second copy.
/// 2. The connection that opened the file takes the database's write lock (`BEGIN IMMEDIATE`) and
///    keeps it until the swap is done, so that no other connection can write meanwhile. A file in
///    WAL mode is first switched to `DELETE` mode, which SQLite allows only when no other
///    connection has it open (otherwise: ``EncryptedDatabaseError/busy(path:detail:)``); the new
///    file is put back in WAL mode. (A WAL or shared-memory file next to the path must never
///    describe a different database than the one at the path.)
/// 3. A temporary file `.<name>.<random>.rekey-export` is created in the same folder with the
///    original's mode and owner, and held with an exclusive `flock` while it is written.
/// 4. A second connection reads the original and writes the temporary with
///    `ATTACH … KEY ?` (the key bound as a parameter) and `sqlcipher_export`, after setting the
///    new settings on the attached schema (`PRAGMA export.kdf_iter`, …); `user_version`,
///    `application_id` and `auto_vacuum`, which the export does not copy, are copied explicitly.
/// 5. The temporary is verified on a fresh connection with the new key and settings: the
///    configured check (`quick_check` by default), the same schema, the same row count in every
///    table, and the same `user_version` and `application_id` as the original.
/// 6. fsync the temporary, `rename` it over the original, fsync the folder; then release the lock.
///
/// Temporaries of a killed run are removed by the next open (``RotationTemporaries``), but only
/// those no live process holds locked.
///
/// Processes that still have the old file open: they keep the old inode, which is no longer at the
/// path. While the swap runs they cannot write (the lock); after it, what they write goes into the
/// unlinked old file and is lost. Run this path (plaintext encryption, legacy upgrades and settings
/// changes) when no other process uses the database, e.g. at application start-up before other
/// connections open. Key-only rotations stay in place (``InPlaceRotation``), where SQLite's locking
/// protects such processes.
struct ExportRotation {
    let path: String
    let busyTimeout: Duration
    let verification: RotationVerification
    let logger: Logger
    var files: FileOperations = .system

    /// The schema name of the new file while it is attached.
    static let schema = "rekey_export"
    /// The suffix every temporary of this path ends with.
    static let temporarySuffix = RotationTemporaries.exportSuffix

    /// A new temporary name in the same folder as `path`.
    static func temporaryPath(for path: String) -> String {
        RotationTemporaries.newPath(for: path, suffix: temporarySuffix)
    }

    /// Rewrites the file that `connection` (opened with `from`) has open for `to`, verifies it, and
    /// swaps it in. `connection` is closed in all cases; on success the returned connection is on
    /// the new file, keyed with `to`. On failure the original is untouched (see the type's notes on
    /// WAL mode) and no temporary is left.
    func run(connection: Connection, from: ResolvedKey, to: ResolvedKey) throws(EncryptedDatabaseError) -> (Connection, RotationReport) {
        let total = Stopwatch()
        defer { connection.close() }
        let bytes = FileSystem.size(of: path) ?? 0
        let checks = RotationChecks(path: path)
        try checks.requireWritable(connection)
        // The new file is about as large as the original (larger with a bigger HMAC overhead).
        try checks.requireSpace(bytes: bytes + bytes / 16, for: "the new copy")

        let journalMode = try sqlite("reading the journal mode") { try connection.journalMode() }
        var restoreWAL = false
        if journalMode == "wal" {
            let walBusy = EncryptedDatabaseError.busy(path: path, detail: "the file is in WAL mode and another connection has it open; close other connections before encrypting or changing cipher settings")
            let mode: String?
            do {
                mode = try connection.queryValue("PRAGMA journal_mode = DELETE", as: String.self)
            } catch let error as SQLiteError where error.code.primary == .busy || error.code.primary == .locked {
                // Leaving WAL mode needs the file to ourselves: waiting longer would not help.
                throw walBusy
            } catch {
                throw sqliteError(error, "leaving WAL mode for the export")
            }
            guard mode?.lowercased() == "delete" else { throw walBusy }
            restoreWAL = true
        }
        var swapped = false
        defer {
            if !swapped && restoreWAL {
                if !connection.isAutocommit { try? connection.execute("ROLLBACK") }
                _ = try? connection.queryValue("PRAGMA journal_mode = WAL", as: String.self)
            }
        }
        try sqlite("locking the database for the export") { try connection.execute("BEGIN IMMEDIATE") }
        // Read under the lock: nothing can change between these facts and the export.
        let original = try sqlite("reading the database's settings") { () throws -> SourceFacts in try SourceFacts(connection, journalMode: journalMode) }

        logger.notice("rewriting database through an export", metadata: [
            "path": "\(path)", "from": "\(from.id)", "to": "\(to.id)", "settings": "\(to.cipher)", "bytes": "\(bytes)",
        ])
        let temporary = Self.temporaryPath(for: path)
        let lock: LockedNewFile
        do {
            lock = try LockedNewFile(path: temporary, mode: FileSystem.permissions(of: path) ?? 0o600, ownerOf: path)
        } catch {
            throw .ioFailure(path: path, operation: "creating the temporary \(temporary)", detail: error.description)
        }
        defer {
            if !swapped {
                for suffix in ["-journal", "-wal", "-shm", ""] { files.removeIfPresent(temporary + suffix) }
            }
            lock.unlock()
        }

        let exportTime = Stopwatch()
        try export(from: from, to: to, into: temporary, original: original, restoreWAL: restoreWAL)
        let exportDuration = exportTime.elapsed

        let verifyTime = Stopwatch()
        try verify(temporary, key: to, against: original)
        let verifyDuration = verifyTime.elapsed

        // No side file of the copy may follow it to the original's name.
        for suffix in ["-journal", "-wal", "-shm"] where FileManager.default.fileExists(atPath: temporary + suffix) {
            throw .ioFailure(path: path, operation: "swapping in the exported file", detail: "the copy still has a \(suffix) file; the original was left in place")
        }
        do {
            try files.fsync(temporary)
            try files.rename(temporary, path)
            swapped = true
            try files.fsyncDirectory(FileSystem.folder(of: path))
        } catch {
            if swapped {
                // The rename happened; only the folder's flush failed. The new file is in place.
                logger.warning("folder fsync failed after the swap", metadata: ["path": "\(path)", "error": "\(error)"])
            } else {
                throw .ioFailure(path: path, operation: "swapping in the exported file", detail: error.description)
            }
        }
        connection.close()  // releases the lock, held on the old file until now
        lock.unlock()

        let opened: Connection
        do {
            opened = try Connection(path: path, access: .readWrite, key: to.material, cipher: to.cipher, busyTimeout: busyTimeout)
            try opened.verifyReadable()
        } catch {
            throw .verificationFailed(path: path, keyID: to.id, detail: "the swapped-in file did not open: \(error)")
        }
        let report = RotationReport(
            fromKeyID: from.id, toKeyID: to.id, journalMode: original.journalMode, bytes: bytes,
            rekeyDuration: exportDuration, verifyDuration: verifyDuration, verification: verification,
            totalDuration: total.elapsed, method: .export)
        logger.notice("rewrote database through an export", metadata: [
            "path": "\(path)", "from": "\(from.id)", "to": "\(to.id)",
            "export_ms": "\(Int(exportDuration.milliseconds))", "verify_ms": "\(Int(verifyDuration.milliseconds))",
        ])
        return (opened, report)
    }

    /// What the new file must reproduce.
    struct SourceFacts {
        let journalMode: String
        let userVersion: Int32
        let applicationID: Int32
        let autoVacuum: Int
        let pageSize: Int
        let schema: [String]
        let rowCounts: [String: Int64]

        init(_ connection: Connection, journalMode: String) throws {
            self.journalMode = journalMode
            userVersion = try connection.userVersion()
            applicationID = try connection.applicationID()
            autoVacuum = try connection.queryValue("PRAGMA auto_vacuum", as: Int.self) ?? 0
            pageSize = try connection.integerPragma("page_size") ?? 4096
            (schema, rowCounts) = try Self.content(connection)
        }

        /// Every schema object (type, name, table, SQL) and the row count of every table.
        static func content(_ connection: Connection) throws -> ([String], [String: Int64]) {
            let objects = try connection.query("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_autoindex_%' ORDER BY type, name")
            var schema: [String] = []
            var counts: [String: Int64] = [:]
            for object in objects {
                let type = try object.get("type", as: String.self)
                let name = try object.get("name", as: String.self)
                let table = try object.get("tbl_name", as: String.self)
                let sql = try object.get("sql", as: String?.self) ?? ""
                schema.append("\(type)|\(name)|\(table)|\(sql)")
                if type == "table" && !sql.uppercased().hasPrefix("CREATE VIRTUAL TABLE") {
                    counts[name] = try connection.queryValue("SELECT count(*) FROM \"\(name.replacingOccurrences(of: "\"", with: "\"\""))\"", as: Int64.self) ?? 0
                }
            }
            return (schema, counts)
        }
    }

    func export(from: ResolvedKey, to: ResolvedKey, into temporary: String, original: SourceFacts, restoreWAL: Bool) throws(EncryptedDatabaseError) {
        try sqlite("exporting into \(temporary)") {
            let exporter = try Connection(path: path, access: .readWrite, key: from.material, cipher: from.cipher, busyTimeout: busyTimeout)
            defer { exporter.close() }
            try exporter.attach(path: temporary, as: Self.schema, key: to.material, settings: to.cipher)
            if to.material == nil {
                try exporter.execute("PRAGMA \(Self.schema).page_size = \(original.pageSize)")
            }
            try exporter.execute("PRAGMA \(Self.schema).auto_vacuum = \(original.autoVacuum)")
            try exporter.execute("BEGIN")
            _ = try exporter.queryValue("SELECT sqlcipher_export('\(Self.schema)')", as: String.self)
            try exporter.execute("PRAGMA \(Self.schema).user_version = \(original.userVersion)")
            try exporter.execute("PRAGMA \(Self.schema).application_id = \(original.applicationID)")
            try exporter.execute("COMMIT")
            try exporter.detach(Self.schema)
            if restoreWAL {
                // Put the new file in WAL mode on its own connection; closing it removes its WAL.
                let walSetter = try Connection(path: temporary, access: .readWrite, key: to.material, cipher: to.cipher, busyTimeout: busyTimeout)
                _ = try walSetter.queryValue("PRAGMA journal_mode = WAL", as: String.self)
                walSetter.close()
            }
        }
    }

    /// Opens the temporary on a fresh connection with the new key and compares it with the original.
    func verify(_ temporary: String, key: ResolvedKey, against original: SourceFacts) throws(EncryptedDatabaseError) {
        func fail(_ detail: String) -> EncryptedDatabaseError {
            .verificationFailed(path: path, keyID: key.id, detail: "the exported copy \(detail); the original was left in place")
        }
        do {
            // Read-write so that closing it removes the WAL and shared-memory files of a WAL-mode copy.
            let copy = try Connection(path: temporary, access: .readWrite, key: key.material, cipher: key.cipher, busyTimeout: busyTimeout)
            defer { copy.close() }
            try copy.verifyReadable()
            let check: String? = switch verification {
            case .schema: nil
            case .quickCheck, .pages: "PRAGMA quick_check"
            case .integrityCheck: "PRAGMA integrity_check"
            }
            if let check {
                let result = try copy.query(check).compactMap { try $0.get(0, as: String?.self) }
                guard result == ["ok"] else { throw fail("failed \(check): \(result.prefix(3).joined(separator: "; "))") }
            }
            let (schema, counts) = try SourceFacts.content(copy)
            guard schema == original.schema else { throw fail("has a different schema") }
            guard counts == original.rowCounts else { throw fail("has different row counts") }
            guard try copy.userVersion() == original.userVersion, try copy.applicationID() == original.applicationID else {
                throw fail("has a different user_version or application_id")
            }
            if key.material != nil, let size = key.cipher.effective.pageSize,
               let actual = try copy.integerPragma("cipher_page_size"), actual != size {
                throw fail("has page size \(actual) instead of \(size)")
            }
        } catch let error as EncryptedDatabaseError {
            throw error
        } catch {
            throw fail("could not be checked: \(error)")
        }
    }

    /// The error for a failure of SQLite work during `operation`.
    private func sqliteError(_ error: any Error, _ operation: String) -> EncryptedDatabaseError {
        switch error {
        case let error as EncryptedDatabaseError: return error
        case let error as SQLiteError: return EncryptedDatabaseError.from(error, path: path, operation: operation)
        default: return .ioFailure(path: path, operation: operation, detail: "\(error)")
        }
    }

    /// Runs SQLite work and maps its failure to the matching error for `operation`.
    private func sqlite<T>(_ operation: String, _ body: () throws -> T) throws(EncryptedDatabaseError) -> T {
        do {
            return try body()
        } catch let error as EncryptedDatabaseError {
            throw error
        } catch let error as SQLiteError {
            throw EncryptedDatabaseError.from(error, path: path, operation: operation)
        } catch {
            throw .ioFailure(path: path, operation: operation, detail: "\(error)")
        }
    }
}
