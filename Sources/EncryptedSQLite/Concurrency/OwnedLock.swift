#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A mutex that knows its owner: locking it again on the thread that holds it is reported
/// (``lock()`` returns `false`) instead of blocking that thread for ever. The writer's lock is
/// one, so that any call that needs the writer from inside a write closure on the same thread
/// (`backup(to:)`, a rotation, a step aside) stops with a message rather than hanging.
///
/// ```swift
/// let lock = OwnedLock()
/// precondition(lock.lock(), "already held by this thread")
/// defer { lock.unlock() }
/// ```
final class OwnedLock: @unchecked Sendable {
    // Invariant: initialized in `init`, destroyed in `deinit`, never moved (a pthread mutex must
    // stay at its address).
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
        let status = pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Takes the lock, waiting for another thread to release it; `false`, without waiting, when
    /// the current thread holds it already.
    func lock() -> Bool {
        let status = pthread_mutex_lock(mutex)
        if status == EDEADLK { return false }
        precondition(status == 0, "pthread_mutex_lock failed: \(status)")
        return true
    }

    /// Releases the lock, which the current thread holds.
    func unlock() {
        pthread_mutex_unlock(mutex)
    }
}
