@testable import EncryptedSQLite
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Counts the thread-specific destructors that have finished (a C destructor cannot capture).
private enum ThreadExits {
    static let lock = NSLock()
    nonisolated(unsafe) static var finished = 0
    /// The threads that set the key (each runs the destructor once as it ends).
    nonisolated(unsafe) static var setters: Set<UInt> = []

    /// A POSIX key whose destructor, run as each thread that set it ends, waits 150 ms and then
    /// counts: like OpenSSL's per-thread cleanup, it runs after the thread's work returned.
    static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { _ in
            // Not an order: a slow teardown widens the window in which a run that returns too
            // early is caught; a correct run waits for the destructor however long it takes.
            usleep(150_000)
            ThreadExits.lock.withLock { ThreadExits.finished += 1 }
        }
        precondition(status == 0)
        return key
    }()
}

@Suite("Fleet workers")
struct FleetWorkersTests {
    /// The rekey command exits as soon as its run returns; a worker still in its thread's
    /// teardown then met OpenSSL's exit-time cleanup and crashed (SIGSEGV in
    /// pthread_rwlock_rdlock). With the workers only waited for until their work returned, this
    /// test finds none of their teardowns done.
    @Test("a fleet run returns only after its worker threads have ended, thread-specific destructors included")
    func workersEndBeforeTheRunReturns() {
        let before = ThreadExits.lock.withLock { ThreadExits.finished }
        ThreadExits.lock.withLock { ThreadExits.setters = [] }
        let key = ThreadExits.key
        let run = FleetWorkers(paths: ["a", "b", "c"], jobs: 3).run(
            isFailure: { (_: Int) in false },
            work: { index, _ in
                if pthread_getspecific(key) == nil {
                    pthread_setspecific(key, UnsafeRawPointer(bitPattern: 1))
                    #if canImport(Darwin)
                    let thread = UInt(bitPattern: pthread_self())
                    #else
                    let thread = UInt(pthread_self())
                    #endif
                    ThreadExits.lock.withLock { _ = ThreadExits.setters.insert(thread) }
                }
                usleep(20_000)  // work that takes a while (spreads the paths over the workers); no check depends on it
                return index
            },
            progress: { _, _ in })
        let (ended, workers) = ThreadExits.lock.withLock { (ThreadExits.finished - before, ThreadExits.setters.count) }
        #expect(run.outcomes == [0, 1, 2])
        #expect(workers >= 1)
        #expect(ended == workers, "\(ended) of the \(workers) worker threads had ended when the run returned")
    }
}
