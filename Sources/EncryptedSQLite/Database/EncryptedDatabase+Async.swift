import Foundation

extension EncryptedDatabase {
    /// `read(_:)` for Swift concurrency: runs on a thread of the database's own dispatch queue,
    /// not on the cooperative pool.
    /// - Throws: as `read(_:)`.
    public func read<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try await run(on: readers == nil ? writerQueue : queue) { try self.read(body) }
    }

    /// `write(_:)` for Swift concurrency.
    /// - Throws: as `write(_:)`.
    public func write<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try await enqueueWrite(body)
    }

    /// `writeWithoutTransaction(_:)` for Swift concurrency.
    /// - Throws: as `writeWithoutTransaction(_:)`.
    public func writeWithoutTransaction<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try await run(on: writerQueue) { try self.writeWithoutTransaction(body) }
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
