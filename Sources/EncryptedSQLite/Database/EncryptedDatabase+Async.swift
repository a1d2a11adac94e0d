import Foundation

extension EncryptedDatabase {
    /// `read(_:)` for Swift concurrency.
    ///
    /// With a reader pool, when a reader is free the read runs at once on the calling task's
    /// thread: a pooled read waits for nothing (not for the writer, in WAL mode), so it is the
    /// work of its statements only, without two thread hand-overs that cost about ten times a
    /// primary-key lookup. When every reader is in use, while a rotation has the pool, or without
    /// a pool (the read then shares the writer), it runs on a thread of the database's own
    /// dispatch queue and the task waits suspended, so no thread of the cooperative pool waits.
    /// Either way the call suspends the task at least once (`Task.yield()`), so a loop of reads
    /// leaves room for the other tasks of its thread.
    ///
    /// ```swift
    /// let count = try await database.read { db in
    ///     try db.queryValue("SELECT count(*) FROM notes", as: Int.self)
    /// }
    /// ```
    /// - Throws: as `read(_:)`.
    public func read<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        if let readers, case .read(let value) = try readOnFreeReader(readers, body) {
            // Still a suspension point, as the caller expects of `await`: a loop of reads lets
            // the other tasks of its thread run.
            await Task.yield()
            return value
        }
        return try await run(on: readers == nil ? writer.queue : queue) { try self.read(body) }
    }

    /// `write(_:)` for Swift concurrency.
    /// - Throws: as `write(_:)`.
    public func write<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try await writer.enqueue(body, through: { work in try self.write(work) })
    }

    /// `writeWithoutTransaction(_:)` for Swift concurrency.
    /// - Throws: as `writeWithoutTransaction(_:)`.
    public func writeWithoutTransaction<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try await run(on: writer.queue) { try self.writeWithoutTransaction(body) }
    }

    /// The continuation is resumed exactly once, by the queued work. It is the checked form: with
    /// the unchecked one, ThreadSanitizer reports the resumption and the task's own frame as a data
    /// race (it does not see the runtime's ordering between them), and the CI's ThreadSanitizer
    /// phase must stay clean.
    private func run<T: Sendable>(on queue: DispatchQueue, _ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try work() }) }
        }
    }
}
