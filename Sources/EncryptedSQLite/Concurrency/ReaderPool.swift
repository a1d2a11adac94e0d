import CipherFormats
import Foundation
import KeyConfiguration
import SQLCipherConnection

/// A small pool of read-only connections to one WAL-mode database, keyed without a key derivation
/// each (see `DerivedKey`), for reads that run concurrently with each other and with the writer.
/// Readers open through ``KeyedConnections``, keyed with the key's material and cipher settings together.
///
/// Rotation cooperates with the pool: ``drain()`` stops new check-outs, waits until every reader
/// is back, and closes them all; ``resume(keyedWith:)`` lets readers open again, keyed with the
/// new key. So no reader can run on a connection keyed with an old key. A rotation made by another
/// process is met rather than made: ``replaceKey(_:)`` closes the idle readers and each reader in
/// use when it comes back, without waiting for them.
final class ReaderPool: @unchecked Sendable {
    private let trial: KeyedConnections
    private let capacity: Int
    private let setup: @Sendable (Connection) throws -> Void
    // Invariant: every property below is only touched with `condition` locked.
    private let condition = NSCondition()
    private var idle: [Connection] = []
    private var opened = 0
    private var checkedOut = 0
    private var draining = false
    /// `true` after ``close()``: check-outs throw, and nothing opens a reader again.
    private var isClosed = false
    private let path: String
    private var key: ResolvedKey
    /// Counts ``replaceKey(_:)`` calls: a reader opened before the last one is closed when it
    /// comes back.
    private var generation = 0
    /// Check-outs waiting for a reader now (for tests, ``waitingCount``).
    private var waiters = 0

    /// A pool of up to `capacity` readers of `path`, keyed with `key`; `setup` runs on each reader
    /// it opens (foreign keys and the application's `prepareConnection`).
    init(path: String, capacity: Int, key: ResolvedKey, busyTimeout: Duration, setup: @escaping @Sendable (Connection) throws -> Void) {
        trial = KeyedConnections(path: path, access: .readOnly, busyTimeout: busyTimeout)
        self.path = path
        self.capacity = max(1, capacity)
        self.key = key
        self.setup = setup
    }

    /// The key readers are opened with (for tests: a derived raw key, never a passphrase, with
    /// the settings of the file).
    var readerKey: ResolvedKey { condition.withLock { key } }

    /// Runs `body` on a reader inside a deferred transaction (a consistent snapshot), waiting for
    /// a free reader when all are busy.
    func withReader<T>(_ body: (Connection) throws -> T) throws -> T {
        // Waiting, a reader always comes.
        try withCheckedOut(try checkOut(waiting: true)!, body)
    }

    /// Runs `body` as ``withReader(_:)`` does when a reader is free now (idle, or one more may
    /// open); returns `nil` at once, without running `body`, when every reader is in use or the
    /// pool is drained for a rotation.
    func withFreeReader<T>(_ body: (Connection) throws -> T) throws -> T? {
        guard let checkedOut = try checkOut(waiting: false) else { return nil }
        return try withCheckedOut(checkedOut, body)
    }

    private func withCheckedOut<T>(_ checkedOut: (Connection, generation: Int), _ body: (Connection) throws -> T) throws -> T {
        let (connection, generation) = checkedOut
        var reusable = true
        defer { checkIn(connection, reusable: reusable, generation: generation) }
        do {
            return try connection.transaction(.deferred) { try body($0) }
        } catch let error as SQLiteError where error.code.primary == .notADatabase || error.code.primary == .corrupt {
            reusable = false
            throw error
        }
    }

    /// A reader and the generation it belongs to; when none is free, waits for one, or returns
    /// `nil` when not `waiting`.
    private func checkOut(waiting: Bool) throws -> (Connection, generation: Int)? {
        condition.lock()
        while draining || (idle.isEmpty && opened >= capacity) {
            if isClosed {
                condition.unlock()
                throw EncryptedDatabaseError.closed(path: path)
            }
            guard waiting else {
                condition.unlock()
                return nil
            }
            waiters += 1
            condition.wait()
            waiters -= 1
        }
        let generation = self.generation
        if let connection = idle.popLast() {
            checkedOut += 1
            condition.unlock()
            return (connection, generation)
        }
        opened += 1
        checkedOut += 1
        let key = self.key
        condition.unlock()
        do {
            let connection = try trial.connect(key)
            do {
                try connection.verifyReadable()
                try setup(connection)
            } catch {
                connection.close()
                throw error
            }
            return (connection, generation)
        } catch {
            condition.withLock {
                opened -= 1
                checkedOut -= 1
                condition.broadcast()
            }
            throw error
        }
    }

    private func checkIn(_ connection: Connection, reusable: Bool, generation: Int) {
        condition.withLock {
            checkedOut -= 1
            if reusable && !draining && generation == self.generation {
                idle.append(connection)
            } else {
                connection.close()
                opened -= 1
            }
            condition.broadcast()
        }
    }

    /// Stops new check-outs, waits for every reader in use, and closes all readers.
    func drain() {
        condition.withLock {
            draining = true
            while checkedOut > 0 { condition.wait() }
            for connection in idle { connection.close() }
            opened -= idle.count
            idle.removeAll()
        }
    }

    /// Lets readers open again, keyed with `key` (not after ``close()``).
    func resume(keyedWith key: ResolvedKey) {
        condition.withLock {
            self.key = key
            draining = isClosed
            condition.broadcast()
        }
    }

    /// ``drain()`` for good (the database is closing): check-outs waiting now and later throw
    /// ``EncryptedDatabaseError/closed(path:)``.
    func close() {
        drain()
        condition.withLock {
            isClosed = true
            condition.broadcast()
        }
    }

    /// Keys readers opened from now on with `key`, closes the idle readers, and closes each reader
    /// in use when it comes back (after another process rotated the file: their key no longer
    /// opens it, and each reader in use finishes on the snapshot it has).
    func replaceKey(_ key: ResolvedKey) {
        condition.withLock {
            self.key = key
            generation += 1
            for connection in idle { connection.close() }
            opened -= idle.count
            idle.removeAll()
            condition.broadcast()
        }
    }

    /// The number of reader connections open now.
    var openCount: Int { condition.withLock { opened } }

    /// The number of reads waiting for a reader now (for tests: a test that holds every reader
    /// waits until a read waits, instead of sleeping). Unused by the library.
    var waitingCount: Int { condition.withLock { waiters } }
}
