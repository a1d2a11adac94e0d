import Foundation
import Logging

/// An encrypted SQLite database opened with an ordered key list.
///
/// Opening finds the key that opens the file, trying the current key first and then the older
/// keys from oldest to newest. When an older key opened it, the file is rotated to the current key
/// before the database is handed out, and the rotation is verified on a fresh connection.
///
/// ```swift
/// let keys = try KeysFile.load(path: "Keys").keyList(forDatabase: "app.sqlite")
/// let database = try EncryptedDatabase(path: "app.sqlite", keys: keys)
/// print(database.report.openedWithKeyID, database.report.rotated)
/// try database.write { db in try db.execute("INSERT INTO notes(text) VALUES (?)", ["hello"]) }
/// let count = try database.read { db in try db.queryValue("SELECT count(*) FROM notes", as: Int.self) }
/// ```
///
/// An `EncryptedDatabase` is safe to share between threads: every access runs on its one
/// connection, one closure at a time.
public final class EncryptedDatabase: @unchecked Sendable {
    /// The database path.
    public let path: String
    /// The key list the database was opened with.
    public let keys: KeyList
    private let options: OpenOptions
    // Invariant: `connection` and `currentReport` are only touched with `lock` held.
    private let lock = NSLock()
    private var connection: Connection
    private var currentReport: OpenReport

    /// Opens (and, unless disabled, rotates) the database at `path`.
    ///
    /// - Parameters:
    ///   - path: The database file.
    ///   - keys: Its keys, oldest first; the last is the current key.
    ///   - options: Creation, read-only, rotation, busy timeout, verification and logging.
    /// - Throws: ``EncryptedDatabaseError``: the file is missing, empty, too short, plaintext, not
    ///   opened by any key, busy, read-only, or the rotation failed. A failed open leaves the file
    ///   byte-identical.
    public init(path: String, keys: KeyList, options: OpenOptions = OpenOptions()) throws(EncryptedDatabaseError) {
        let stopwatch = Stopwatch()
        self.path = path
        self.keys = keys
        self.options = options
        var created = false
        if options.createIfMissing, !options.readOnly, case .missing = DatabaseFileKind.inspect(path: path) {
            created = try DatabaseCreation(path: path, key: keys.current, busyTimeout: options.busyTimeout, logger: options.logger).run()
        }
        let trial = KeyTrial(path: path, access: options.readOnly ? .readOnly : .readWrite, busyTimeout: options.busyTimeout)
        let outcome = try KeyProbe(keys: keys, trial: trial).run()
        options.logger.info("opened database", metadata: [
            "path": "\(path)", "key": "\(outcome.key.id)", "attempts": "\(outcome.attempts.count)",
        ])
        var connection = outcome.connection
        var rotation: RotationReport?
        if outcome.key.id != keys.currentID {
            if options.readOnly {
                throw .rotationNeeded(path: path, openedWith: outcome.key.id, currentKeyID: keys.currentID)
            }
            if options.rotateToCurrentKey {
                (connection, rotation) = try Self.rotation(path: path, options: options)
                    .run(connection: connection, from: outcome.key, to: keys.current)
            }
        }
        self.connection = connection
        currentReport = OpenReport(
            path: path, openedWithKeyID: outcome.key.id, currentKeyID: keys.currentID, attempts: outcome.attempts,
            created: created, rotation: rotation, totalDuration: stopwatch.elapsed)
    }

    /// What happened when the database was opened (and rotated, if it was rotated later by
    /// ``rotateToCurrentKey()``, that rotation).
    public var report: OpenReport {
        lock.withLock { currentReport }
    }

    /// Runs `body` with the connection, one caller at a time.
    /// - Throws: whatever `body` throws.
    public func read<T>(_ body: (Connection) throws -> T) throws -> T {
        try lock.withLock { try body(connection) }
    }

    /// Runs `body` with the connection inside an `IMMEDIATE` transaction, one caller at a time:
    /// commits when `body` returns, rolls back when it throws (and rethrows its error unchanged).
    /// - Throws: whatever `body` throws, or ``SQLiteError`` when the transaction cannot begin or commit.
    public func write<T>(_ body: (Connection) throws -> T) throws -> T {
        try lock.withLock {
            try connection.execute("BEGIN IMMEDIATE")
            do {
                let result = try body(connection)
                try connection.execute("COMMIT")
                return result
            } catch {
                if !connection.isAutocommit { try? connection.execute("ROLLBACK") }
                throw error
            }
        }
    }

    /// Rotates the file to the current key if it is not on it yet (for databases opened with
    /// ``OpenOptions/rotateToCurrentKey`` off).
    /// - Returns: the rotation, or `nil` when the file was already on the current key.
    /// - Throws: ``EncryptedDatabaseError`` as for opening; on failure the database stays usable
    ///   on its old key.
    @discardableResult
    public func rotateToCurrentKey() throws(EncryptedDatabaseError) -> RotationReport? {
        lock.lock()
        defer { lock.unlock() }
        let onKey = currentReport.rotation?.toKeyID ?? currentReport.openedWithKeyID
        guard onKey != keys.currentID, let from = keys.keys.first(where: { $0.id == onKey }) else { return nil }
        if options.readOnly {
            throw .rotationNeeded(path: path, openedWith: onKey, currentKeyID: keys.currentID)
        }
        let (rotated, rotation) = try Self.rotation(path: path, options: options).run(connection: connection, from: from, to: keys.current)
        connection = rotated
        let old = currentReport
        currentReport = OpenReport(
            path: old.path, openedWithKeyID: old.openedWithKeyID, currentKeyID: old.currentKeyID, attempts: old.attempts,
            created: old.created, rotation: rotation, totalDuration: old.totalDuration)
        return rotation
    }

    /// Finds which key opens a file and whether it needs rotation, without writing anything: the
    /// file is opened read-only.
    /// - Throws: ``EncryptedDatabaseError`` as for opening (except rotation errors).
    public static func check(path: String, keys: KeyList, busyTimeout: Duration = .seconds(5)) throws(EncryptedDatabaseError) -> KeyCheck {
        let trial = KeyTrial(path: path, access: .readOnly, busyTimeout: busyTimeout)
        let outcome = try KeyProbe(keys: keys, trial: trial).run()
        outcome.connection.close()
        return KeyCheck(path: path, openedWithKeyID: outcome.key.id, currentKeyID: keys.currentID, attempts: outcome.attempts)
    }

    private static func rotation(path: String, options: OpenOptions) -> InPlaceRotation {
        InPlaceRotation(path: path, busyTimeout: options.busyTimeout, verification: options.verification, logger: options.logger)
    }
}

/// The result of ``EncryptedDatabase/check(path:keys:busyTimeout:)``.
public struct KeyCheck: Sendable, Equatable {
    /// The database path.
    public let path: String
    /// The id of the key that opens the file.
    public let openedWithKeyID: String
    /// The id of the current key.
    public let currentKeyID: String
    /// The keys tried, in order.
    public let attempts: [OpenReport.KeyAttempt]

    /// `true` when the file is on an older key.
    public var needsRotation: Bool { openedWithKeyID != currentKeyID }
}
