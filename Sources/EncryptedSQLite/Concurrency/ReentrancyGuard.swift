import Foundation
import SQLCipherConnection
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Detects a thread that calls back into the same database from inside one of its access
/// closures, which would otherwise deadlock silently on the writer lock.
///
/// Each thread keeps the databases it is inside in thread-specific storage of its own (one
/// POSIX key for the process): `Thread.current.threadDictionary`, used before, cost more per
/// access than the statement the access ran (Benchmarks/README.md).
struct ReentrancyGuard: Sendable {
    /// Identifies this database among the ones a thread is inside.
    private let token = Token()

    /// Runs `body` marked as inside this database's access on the current thread.
    func enter<T>(_ method: String, _ body: () throws -> T) rethrows -> T {
        let marks = ThreadMarks.current
        let id = ObjectIdentifier(token)
        precondition(!marks.entered.contains(id), """
            EncryptedDatabase.\(method) was called from inside another read or write closure of the same \
            database on the same thread, which would deadlock. Use the Connection the closure was given \
            (nest transactions with db.transaction or db.savepoint).
            """)
        marks.entered.append(id)
        defer { marks.entered.removeLast() }
        return try body()
    }

    private final class Token: Sendable {}
}

/// The databases the current thread is inside, innermost last. Only its own thread touches it.
private final class ThreadMarks {
    var entered: [ObjectIdentifier] = []

    /// The POSIX key of every thread's marks; a thread's marks are released when it exits.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { pointer in
            #if canImport(Glibc)
            guard let pointer else { return }
            #endif
            Unmanaged<ThreadMarks>.fromOpaque(pointer).release()
        }
        precondition(status == 0, "pthread_key_create failed: \(status)")
        return key
    }()

    /// The current thread's marks, made on first use.
    static var current: ThreadMarks {
        if let pointer = pthread_getspecific(key) { return Unmanaged<ThreadMarks>.fromOpaque(pointer).takeUnretainedValue() }
        let marks = ThreadMarks()
        pthread_setspecific(key, Unmanaged.passRetained(marks).toOpaque())
        return marks
    }
}
