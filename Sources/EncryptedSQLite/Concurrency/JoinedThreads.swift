import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Threads that are waited for until they have ended, not only until their work returned.
///
/// A thread's work returning is not its end: its thread-specific data is destroyed after that,
/// and OpenSSL 3, which SQLCipher encrypts with, keeps per-thread state there whose destructor
/// takes OpenSSL's global locks. A process that exits while a worker is still in those
/// destructors runs OpenSSL's `atexit` cleanup, which frees the locks, under the worker, and the
/// worker crashes (SIGSEGV in `pthread_rwlock_rdlock` on a null lock). Joining each thread
/// (`pthread_join`) waits for all of it, so a command may exit as soon as its workers' run
/// returns.
enum JoinedThreads {
    /// Runs `body` on `count` new threads with `stackSize`-byte stacks and returns when every one
    /// of them has ended. A thread that cannot be started runs its `body` on the calling thread,
    /// so `body` always runs `count` times.
    static func run(count: Int, stackSize: Int, _ body: @escaping @Sendable () -> Void) {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setstacksize(&attributes, stackSize)
        var started: [pthread_t] = []
        for _ in 0..<count {
            let work = Unmanaged.passRetained(Work(body)).toOpaque()
            #if canImport(Darwin)
            var thread: pthread_t?
            #else
            var thread = pthread_t()
            #endif
            let status = pthread_create(&thread, &attributes, { context in
                #if canImport(Darwin)
                let work = Unmanaged<Work>.fromOpaque(context).takeRetainedValue()
                #else
                let work = Unmanaged<Work>.fromOpaque(context!).takeRetainedValue()
                #endif
                work.body()
                return nil
            }, work)
            #if canImport(Darwin)
            if status == 0, let thread { started.append(thread); continue }
            #else
            if status == 0 { started.append(thread); continue }
            #endif
            Unmanaged<Work>.fromOpaque(work).release()
            body()
        }
        for thread in started { pthread_join(thread, nil) }
    }

    /// The closure a thread runs, handed to it through `pthread_create`'s context pointer.
    private final class Work {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
}
