import DurableFiles
import Foundation
import KeyConfiguration
import SQLCipherConnection

extension EncryptedDatabase {
    // MARK: Access

    /// Runs `body` with read-only access on a consistent snapshot (a deferred transaction).
    ///
    /// With a reader pool, reads run concurrently on read-only connections; without one, on the
    /// writer connection, which then refuses statements that write, one caller at a time. Right after `BEGIN` the
    /// library reads the schema version itself, which fixes the snapshot and proves the key; when
    /// that read finds the file rotated by another process, the database follows the rotation and
    /// tries again before `body` ever runs (<doc:KeyRotation>).
    ///
    /// Unavailable from async code (`noasync`): there, `try await` runs the `async` overload,
    /// which does not block a thread of the cooperative pool (<doc:TransactionsAndConcurrency>).
    /// - Throws: whatever `body` throws; `SQLiteError` (code `readOnly`) if `body` tries to write;
    ///   ``EncryptedDatabaseError`` when the file was rotated elsewhere and could not be followed.
    @available(*, noasync, message: "in async code, call it with `try await` (the async overload); in top-level code, from an async function")
    public func read<T>(_ body: (Connection) throws -> T) throws -> T {
        try checkOpen()
        return try performRead(body)
    }

    /// ``read(_:)`` without the closed check: for async work queued before ``close()``, which runs.
    func performRead<T>(_ body: (Connection) throws -> T) throws -> T {
        try reentrancy.enter("read") {
            if let readers {
                try follower.stepAsideIfAsked()
                return try follower.followingRotations("read", writerLockHeld: false) { entered in
                    try readers.withReader { db in
                        try RotationFollower.proveKey(db)
                        entered()
                        return try body(db)
                    }
                }
            }
            return try writer.withLock {
                try follower.readyWriter(operation: "read")
                return try follower.followingRotations("read", writerLockHeld: true) { entered in
                    try writer.connection.readingOnly { db in
                        try db.transaction(.deferred) { db in
                            try RotationFollower.proveKey(db)
                            entered()
                            return try body(db)
                        }
                    }
                }
            }
        }
    }

    /// What ``readOnFreeReader(_:_:)`` did.
    enum ReadOnFreeReader<T> {
        /// `body` ran and returned this.
        case read(T)
        /// `body` did not run: no reader was free, or the file was found rotated elsewhere
        /// before `body` started (`read(_:)` follows the rotation).
        case notNow
    }

    /// Runs `body` as `read(_:)` does, on the calling thread, when a pooled reader is free now
    /// and the file is still on the pool's key; otherwise returns `.notNow` without running it
    /// and without waiting. A failure after `body` started is thrown unchanged, so `body` never
    /// runs twice.
    func readOnFreeReader<T>(_ readers: ReaderPool, _ body: (Connection) throws -> T) throws -> ReadOnFreeReader<T> {
        try reentrancy.enter("read") {
            if let stepAside = follower.stepAside, stepAside.isAsked || follower.steppedAside.withLock({ $0 }) { return .notNow }
            var started = false
            do {
                let outcome = try readers.withFreeReader { db -> ReadOnFreeReader<T> in
                    try RotationFollower.proveKey(db)
                    started = true
                    return .read(try body(db))
                }
                return outcome ?? .notNow
            } catch let error as SQLiteError where error.code.primary == .notADatabase && !started {
                return .notNow
            }
        }
    }

    /// Runs `body` on the writer connection inside an `IMMEDIATE` transaction, one caller at a
    /// time: commits when `body` returns, rolls back when it throws (rethrowing its error
    /// unchanged). Nested `Connection/transaction(_:_:)` calls become savepoints. When `BEGIN`
    /// finds the file rotated by another process, the database follows the rotation and tries
    /// again before `body` ever runs (<doc:KeyRotation>).
    ///
    /// Unavailable from async code (`noasync`): there, `try await` runs the `async` overload,
    /// which does not block a thread of the cooperative pool (<doc:TransactionsAndConcurrency>).
    /// - Throws: whatever `body` throws, or `SQLiteError` when the transaction cannot begin
    ///   (e.g. busy) or commit; ``EncryptedDatabaseError`` when the file was rotated elsewhere and
    ///   could not be followed.
    @available(*, noasync, message: "in async code, call it with `try await` (the async overload); in top-level code, from an async function")
    public func write<T>(_ body: (Connection) throws -> T) throws -> T {
        try checkOpen()
        return try performWrite(body)
    }

    /// ``write(_:)`` without the closed check: for async work queued before ``close()``, which runs.
    func performWrite<T>(_ body: (Connection) throws -> T) throws -> T {
        try reentrancy.enter("write") {
            try writer.withLock {
                try follower.readyWriter(operation: "write")
                return try follower.followingRotations("write", writerLockHeld: true) { entered in
                    try writer.connection.transaction(.immediate) { db in
                        entered()
                        return try body(db)
                    }
                }
            }
        }
    }

    /// Runs `body` on the writer connection with no transaction around it, one caller at a time:
    /// for statements that cannot run in a transaction (`VACUUM`, `PRAGMA journal_mode`) or for
    /// code that manages transactions itself. The library reads the schema version first and
    /// follows a rotation made elsewhere that this read finds; a rotation that lands after it
    /// fails `body`'s statements (there is no transaction to retry).
    ///
    /// Unavailable from async code (`noasync`): there, `try await` runs the `async` overload,
    /// which does not block a thread of the cooperative pool (<doc:TransactionsAndConcurrency>).
    /// - Throws: whatever `body` throws; ``EncryptedDatabaseError`` when the file was rotated
    ///   elsewhere and could not be followed.
    @available(*, noasync, message: "in async code, call it with `try await` (the async overload); in top-level code, from an async function")
    public func writeWithoutTransaction<T>(_ body: (Connection) throws -> T) throws -> T {
        try checkOpen()
        return try performWriteWithoutTransaction(body)
    }

    /// ``writeWithoutTransaction(_:)`` without the closed check: for async work queued before ``close()``, which runs.
    func performWriteWithoutTransaction<T>(_ body: (Connection) throws -> T) throws -> T {
        try reentrancy.enter("writeWithoutTransaction") {
            try writer.withLock {
                try follower.readyWriter(operation: "writeWithoutTransaction")
                return try follower.followingRotations("writeWithoutTransaction", writerLockHeld: true) { entered in
                    try RotationFollower.proveKey(writer.connection)
                    entered()
                    return try body(writer.connection)
                }
            }
        }
    }
}
