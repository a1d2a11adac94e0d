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
    /// The migrations the open applied, in order (empty without a migrator).
    public let appliedMigrations: [String]
    private let opener: DatabaseOpener
    // Invariant: `connection`, `connectionKey` and `currentReport` are only touched with `lock` held.
    private let lock = NSLock()
    private var connection: Connection
    private var connectionKey: ResolvedKey
    private var currentReport: OpenReport

    /// Opens (and, unless disabled, rotates, then migrates) the database at `path`.
    ///
    /// One call does it all on the same keyed connection: find the key, rotate the file to the
    /// current key, and apply `migrator`'s pending migrations.
    ///
    /// - Parameters:
    ///   - path: The database file.
    ///   - keys: Its keys, oldest first; the last is the current key.
    ///   - options: Creation, read-only, rotation, busy timeout, verification and logging.
    ///   - migrator: Migrations to apply after opening; their identifiers are in
    ///     ``appliedMigrations``.
    /// - Throws: ``EncryptedDatabaseError``: the file is missing, empty, too short, plaintext, not
    ///   opened by any key, busy, read-only, the rotation failed (a failed open leaves the file
    ///   byte-identical), or ``EncryptedDatabaseError/migrationFailed(path:_:)``.
    public init(path: String, keys: KeyList, options: OpenOptions = OpenOptions(), migrator: DatabaseMigrator? = nil) throws(EncryptedDatabaseError) {
        let opener = DatabaseOpener(path: path, keys: keys, options: options)
        let opened = try opener.open()
        if let migrator {
            do {
                appliedMigrations = try migrator.migrate(opened.connection)
            } catch {
                throw .migrationFailed(path: path, error)
            }
        } else {
            appliedMigrations = []
        }
        self.path = path
        self.keys = keys
        self.opener = opener
        connection = opened.connection
        connectionKey = opened.key
        currentReport = opened.report
    }

    /// What happened when the database was opened (and, after ``rotateToCurrentKey()``, that
    /// rotation).
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
        guard connectionKey.id != keys.currentID else { return nil }
        let (rotated, rotation) = try opener.rotate(connection, from: connectionKey)
        connection = rotated
        connectionKey = keys.current
        currentReport = currentReport.with(rotation: rotation)
        return rotation
    }

    /// Finds which key opens a file and whether it needs rotation, without writing anything: the
    /// file is opened read-only.
    /// - Throws: ``EncryptedDatabaseError`` as for opening (except rotation errors).
    public static func check(path: String, keys: KeyList, busyTimeout: Duration = .seconds(5)) throws(EncryptedDatabaseError) -> KeyCheck {
        try DatabaseOpener(path: path, keys: keys, options: OpenOptions(busyTimeout: busyTimeout)).check()
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
