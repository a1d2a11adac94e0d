import Foundation
import SQLCipherConnection

/// Detects a thread that calls back into the same database from inside one of its access
/// closures, which would otherwise deadlock silently on the writer lock.
struct ReentrancyGuard: Sendable {
    private let key = "EncryptedSQLite.access.\(UUID().uuidString)"

    /// Runs `body` marked as inside this database's access on the current thread.
    func enter<T>(_ method: String, _ body: () throws -> T) rethrows -> T {
        let dictionary = Thread.current.threadDictionary
        precondition(dictionary[key] == nil, """
            EncryptedDatabase.\(method) was called from inside another read or write closure of the same \
            database on the same thread, which would deadlock. Use the Connection the closure was given \
            (nest transactions with db.transaction or db.savepoint).
            """)
        dictionary[key] = true
        defer { dictionary[key] = nil }
        return try body()
    }
}
