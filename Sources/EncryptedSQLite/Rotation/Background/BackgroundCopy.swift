import DurableFiles
import Foundation
import KeyConfiguration
import SQLCipherConnection

/// The new file of a background rotation: a temporary beside the database
/// (`.<name>.<8 hex>.rekey-online`, owner-only, locked while it lives), encrypted with the new key
/// from its first page, filled by SQLite's online backup API from the database's writer
/// connection in steps, checked, and published over the database.
///
/// The caller (``EncryptedDatabase``'s background driver) holds the writer lock for ``attach(to:)``,
/// each ``step(pages:)``, ``flushCache()`` and ``complete()``: the copy reads through the writer,
/// and the writer's own writes are carried into the copy as they happen.
final class BackgroundCopy {
    /// The database.
    let path: String
    /// Where the copy is written until it is published.
    var temporary: String { file.temporaryPath }
    /// The new key, as raw key plus the copy's salt when the key is derived (derived once, in
    /// ``create(path:from:to:busyTimeout:files:)``, so that no later open derives it again).
    let key: ResolvedKey
    private let file: DurableNewFile
    private let busyTimeout: Duration
    private let files: FileOperations
    private var destination: Connection?
    private var backup: OnlineBackup?

    private init(path: String, key: ResolvedKey, file: DurableNewFile, destination: Connection, busyTimeout: Duration, files: FileOperations) {
        self.path = path
        self.key = key
        self.file = file
        self.destination = destination
        self.busyTimeout = busyTimeout
        self.files = files
    }

    deinit { discard() }

    /// Creates the temporary encrypted with `to`, checks that `from` does not open it, and
    /// opens the connection the copy writes through (no journal, no flushes: until it is
    /// published the temporary is worthless after a crash and is removed by the next open).
    /// - Throws: ``EncryptedDatabaseError``.
    static func create(path: String, from: ResolvedKey, to: ResolvedKey, busyTimeout: Duration, files: FileOperations) throws(EncryptedDatabaseError) -> BackgroundCopy {
        RotationTemporaries.removeStale(of: path, files: files)
        // Owner-only while it is written; it gets the database's permissions just before the swap.
        let file = try RotationTemporaries.create(for: path, suffix: RotationTemporaries.onlineSuffix, ownerOf: path, files: files,
                                                  reported: path, operation: "creating the background rotation's new file")
        let temporary = file.temporaryPath
        let trial = KeyedConnections(path: temporary, access: .readWrite, busyTimeout: busyTimeout)
        do {
            // The first commit writes page 1, and with it the salt the new key is derived with.
            let first = try trial.connect(to)
            try first.execute("PRAGMA user_version = 1")
            first.close()
            let keyed = trial.keyed(to).key
            guard let destination = try trial.open(with: keyed) else {
                throw EncryptedDatabaseError.verificationFailed(path: path, keyID: to.id, detail: "the new key does not open the new file it just made (\(temporary))")
            }
            if from.material != nil, let stray = try trial.open(with: from) {
                stray.close()
                throw EncryptedDatabaseError.verificationFailed(path: path, keyID: to.id, detail: "the old key \"\(from.id)\" opens the new file too: the two keys are the same key")
            }
            _ = try destination.queryValue("PRAGMA journal_mode = OFF", as: String.self)
            try destination.execute("PRAGMA synchronous = OFF")
            return BackgroundCopy(path: path, key: keyed, file: file, destination: destination, busyTimeout: busyTimeout, files: files)
        } catch let error as EncryptedDatabaseError {
            file.close()
            throw error
        } catch {
            file.close()
            throw EncryptedDatabaseError.from(error, path: path, operation: "preparing the background rotation's new file")
        }
    }

    /// With the writer lock held: starts the copy from `writer`.
    /// - Throws: ``EncryptedDatabaseError``.
    func attach(to writer: Connection) throws(EncryptedDatabaseError) {
        guard let destination else { throw .ioFailure(path: path, operation: "starting the background copy", detail: "the copy was discarded") }
        do {
            backup = try OnlineBackup(from: writer, into: destination)
        } catch {
            throw EncryptedDatabaseError.from(error, path: path, operation: "starting the background copy")
        }
    }

    /// With the writer lock held: copies up to `pages` more pages.
    ///
    /// When another connection (another process) changed the database since the last step,
    /// SQLite starts the copy over from the first page: such a step is counted in ``restarts``.
    /// - Returns: `true` when the copy is complete.
    /// - Throws: ``EncryptedDatabaseError``; busy and locked are returned as `false` (try again).
    func step(pages: Int32) throws(EncryptedDatabaseError) -> Bool {
        guard let backup else { throw .ioFailure(path: path, operation: "copying in the background", detail: "the copy was discarded") }
        do {
            let before = copiedPages
            let complete = try backup.step(pages: pages)
            // A step that is not the last copies exactly `pages` pages after the ones copied
            // before; one that started over has copied `pages` from the first page. (Counting a
            // restart only when the position fell by more than a step missed a copy that started
            // over at every step, with pages it never halved: it never ended.)
            if !complete, before > 0, copiedPages < before + Int(pages) { restarts += 1 }
            return complete
        } catch let error as SQLiteError where error.code.primary == .busy || error.code.primary == .locked {
            return false
        } catch {
            throw EncryptedDatabaseError.from(error, path: path, operation: "copying in the background into \(temporary)")
        }
    }

    /// Pages still to copy, and the database's size in pages, at the last step.
    var remaining: Int { backup?.remaining ?? 0 }
    var pageCount: Int { backup?.pageCount ?? 0 }
    /// Pages copied so far (SQLite's position in the database).
    private var copiedPages: Int { pageCount - remaining }
    /// How many steps found the database changed by another connection and started the copy over.
    private(set) var restarts = 0

    /// With the writer lock held: writes the copy's cached pages to its file, so that
    /// ``synchronize()`` can flush them to disk outside the lock.
    func flushCache() throws(EncryptedDatabaseError) {
        do {
            try destination?.flushCache()
        } catch {
            throw EncryptedDatabaseError.from(error, path: path, operation: "writing the background copy \(temporary)")
        }
    }

    /// Flushes what the copy's file holds to disk (no lock needed: only this copy writes the file).
    func synchronize() throws(EncryptedDatabaseError) {
        do {
            try files.fsync(temporary)
        } catch {
            throw .ioFailure(path: path, operation: "flushing the background copy \(temporary)", detail: error.description)
        }
    }

    /// With the writer lock held: copies every remaining page, commits the copy and closes its
    /// connection. The file is complete but not yet flushed.
    /// - Throws: ``EncryptedDatabaseError``.
    func complete() throws(EncryptedDatabaseError) {
        var done = false
        for _ in 0..<100 where !done {
            done = try step(pages: -1)
        }
        guard done else { throw .busy(path: path, detail: "the background copy's last step stayed busy") }
        let code = backup?.finish() ?? 0
        backup = nil
        destination?.close()
        destination = nil
        if code != 0 { throw .ioFailure(path: path, operation: "finishing the background copy", detail: "sqlite3_backup_finish returned \(code)") }
    }

    /// What the swap compares between the database and its copy: cheap to read in the pause,
    /// except the row counts, read only when the swap's check reads the whole copy anyway.
    struct Facts: Equatable, CustomStringConvertible {
        let pageCount: Int
        let userVersion: Int
        let applicationID: Int
        let schema: [String]
        /// The row count of every table (as the export path counts them), when `countingRows`.
        let rowCounts: [String: Int64]?

        init(_ connection: Connection, countingRows: Bool) throws {
            pageCount = try connection.integerPragma("page_count") ?? -1
            userVersion = try connection.integerPragma("user_version") ?? -1
            applicationID = try connection.integerPragma("application_id") ?? -1
            schema = try connection.query("SELECT type || ' ' || name || ' ' || coalesce(sql, '') FROM sqlite_master ORDER BY type, name").map { try $0.get(0, as: String.self) }
            rowCounts = countingRows ? try DatabaseExport.SourceFacts.content(connection).1 : nil
        }

        var description: String { "\(pageCount) pages, user_version \(userVersion), application_id \(applicationID), \(schema.count) schema objects" }
    }

    /// Opens the completed copy on a fresh connection with the new key and compares it with
    /// `original` (row counts too when `original` has them); runs `check` (`quick_check`,
    /// `integrity_check`) when given.
    /// - Throws: ``EncryptedDatabaseError/verificationFailed(path:keyID:detail:)``.
    func verify(against original: Facts, check: String?) throws(EncryptedDatabaseError) {
        func fail(_ detail: String) -> EncryptedDatabaseError {
            .verificationFailed(path: path, keyID: key.id, detail: "the background copy \(detail); the database was left on its old key")
        }
        do {
            guard let connection = try KeyedConnections(path: temporary, access: .readWrite, busyTimeout: busyTimeout).open(with: key) else {
                throw fail("does not open with the new key")
            }
            defer { connection.close() }
            let copied = try Facts(connection, countingRows: original.rowCounts != nil)
            if let counts = original.rowCounts, let copiedCounts = copied.rowCounts, copiedCounts != counts {
                let tables = Set(counts.keys).union(copiedCounts.keys).sorted().filter { counts[$0] != copiedCounts[$0] }
                throw fail("has different row counts than the database (\(tables.prefix(3).joined(separator: ", ")))")
            }
            guard copied == original else { throw fail("differs from the database: \(copied) against \(original)") }
            if let check {
                let result = try connection.query(check).compactMap { try $0.get(0, as: String?.self) }
                guard result == ["ok"] else { throw fail("failed \(check): \(result.prefix(3).joined(separator: "; "))") }
            }
        } catch let error as EncryptedDatabaseError {
            throw error
        } catch {
            throw fail("could not be read: \(error)")
        }
        for suffix in ["-journal", "-wal"] where (FileSystem.size(of: temporary + suffix) ?? 0) > 0 {
            throw fail("has a \(suffix) file")
        }
    }

    /// Renames the copy over the database durably (the file's flush, the rename, the folder's
    /// flush).
    /// - Throws: ``EncryptedDatabaseError`` when the rename did not happen; a failed folder flush
    ///   after it is only logged by the caller (``PublishFailure/folderNotSynced(_:)``).
    func publish() throws(PublishFailure) {
        if let mode = FileSystem.permissions(of: path), chmod(temporary, mode) != 0 {
            throw .notPublished(.failed(operation: "giving the copy the database's permissions", errno: errno))
        }
        try file.publish(as: path, replacing: true)
        file.close()
    }

    /// Ends the copy and removes the temporary. Safe to call more than once.
    func discard() {
        backup?.finish()
        backup = nil
        destination?.close()
        destination = nil
        file.close()
    }
}
