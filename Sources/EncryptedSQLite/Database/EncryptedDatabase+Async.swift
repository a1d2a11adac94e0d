import Foundation

extension EncryptedDatabase {
    /// `read(_:)` for Swift concurrency: runs on a thread of the database's own dispatch queue,
    /// not on the cooperative pool.
    /// - Throws: as `read(_:)`.
    public func read<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try await run { try self.read(body) }
    }

    /// `write(_:)` for Swift concurrency.
    /// - Throws: as `write(_:)`.
    public func write<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try await run { try self.write(body) }
    }

    /// `writeWithoutTransaction(_:)` for Swift concurrency.
    /// - Throws: as `writeWithoutTransaction(_:)`.
    public func writeWithoutTransaction<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try await run { try self.writeWithoutTransaction(body) }
    }

    private func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try work() }) }
        }
    }
}
