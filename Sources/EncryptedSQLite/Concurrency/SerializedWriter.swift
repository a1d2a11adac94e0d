import DurableFiles
import Foundation
import KeyConfiguration
import SQLCipherConnection

/// The database's one writer connection, used by one caller at a time, with the key it is on and
/// the report of the open (or rotation) that produced it.
///
/// It owns the lock every access to the writer takes, the queue its async writes run on and the
/// writes waiting there (``enqueue(_:through:)``, group commit). ``swap(to:key:report:)`` is the
/// only way to change its connection and key: that is where a rotation, made here or by another
/// process, hands the database a new file, so every such change goes through one place.
///
/// ```swift
/// let value = try writer.withLock { try writer.connection.queryValue("SELECT 1", as: Int.self) }
/// ```
final class SerializedWriter: @unchecked Sendable {
    // Invariant: `connection`, `key`, `report` and `isShutDown` are only touched with `lock` held.
    private let lock = OwnedLock()
    /// The writer connection (closed while the database stands aside or after a failed reopen).
    private(set) var connection: Connection
    /// The key `connection` was opened with: the key the file is on.
    private(set) var key: ResolvedKey
    /// What the open that produced `connection` did (and the last rotation since).
    private(set) var report: OpenReport
    /// `key.id`, readable without the lock (the probe must not wait for a rotation holding it).
    private let keyIDSnapshot: Locked<String>
    /// The id of the key the writer is on, without taking the writer's lock.
    var keyID: String { keyIDSnapshot.withLock { $0 } }
    /// `true` once the database was closed: nothing may open the file for it again.
    private(set) var isShutDown = false
    /// The one thread async writes (and async reads without a reader pool) run on. Work goes
    /// there through ``executor`` (``WriterExecutor/async(_:)``), which marks it as running there.
    let queue = DispatchQueue(label: "EncryptedSQLite.EncryptedDatabase.writer")
    /// `queue` as a task executor (``EncryptedDatabase/writerExecutor``).
    let executor: WriterExecutor
    /// Async writes waiting for `queue`.
    let pendingWrites = PendingWrites()
    /// Whether waiting async writes share one transaction (``OpenOptions/groupCommit``).
    let groupCommit: Bool

    init(connection: Connection, key: ResolvedKey, report: OpenReport, groupCommit: Bool) {
        self.connection = connection
        self.key = key
        keyIDSnapshot = Locked(key.id)
        self.report = report
        self.groupCommit = groupCommit
        executor = WriterExecutor(queue: queue)
    }

    /// Runs `body` holding the writer's lock, with its typed error. Traps, with a message, when
    /// the current thread holds the lock already (a call that needs the writer from inside a
    /// write closure), which would otherwise hang that thread.
    func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        precondition(lock.lock(), """
            An EncryptedDatabase method that needs the database's writer (backup(to:), rotateToCurrentKey, \
            a step aside, a background rotation step) was called from inside a write closure of the same \
            database on the same thread, which would deadlock. Call it after the write closure returns.
            """)
        defer { lock.unlock() }
        return try body()
    }

    /// With the lock held: the writer goes on with `connection`, opened with `key`; `report`, when
    /// given, replaces the report. The connection it had is closed unless it is the same one. The
    /// only place the writer's connection or key changes.
    func swap(to connection: Connection, key: ResolvedKey, report: OpenReport? = nil) {
        if connection !== self.connection, !self.connection.isClosed { self.connection.close() }
        self.connection = connection
        self.key = key
        keyIDSnapshot.withLock { $0 = key.id }
        if let report { self.report = report }
    }

    /// Closes the connection for good (the database's `deinit`): no later access reopens it.
    func shutDown() {
        withLock {
            isShutDown = true
            connection.close()
        }
    }
}
