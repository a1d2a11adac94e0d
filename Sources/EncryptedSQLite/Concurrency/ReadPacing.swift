import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// When an async read that ran in its calling task (a free pooled reader) suspends that task.
///
/// A suspension after every such read (`Task.yield()`) costs a job's trip through the global
/// executor, more than the primary-key lookup it follows, and in a read-heavy service the trips
/// of many readers took the cores the writer's commits needed. Not suspending at all would let
/// a loop of reads keep its thread from every other task. So a thread suspends its reading task
/// once it has run such reads for ``interval`` without a suspension: other tasks of the thread
/// wait at most about that long behind a loop of short reads.
enum ReadPacing {
    /// The longest a thread runs in-task reads before the reading task suspends.
    static let interval: UInt64 = 50_000  // nanoseconds

    /// Each thread's start of its current run of in-task reads (monotonic nanoseconds, 0: none),
    /// kept in the pointer value itself.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key, nil)
        precondition(status == 0, "pthread_key_create failed: \(status)")
        return key
    }()

    /// Called after an in-task read: `true` when the task should suspend now (the run of reads on
    /// this thread is `interval` long), which also starts a new run.
    static func readEnded() -> Bool {
        let now = DispatchTime.now().uptimeNanoseconds
        let start = UInt64(UInt(bitPattern: pthread_getspecific(key)))
        if start != 0, now &- start >= interval {
            pthread_setspecific(key, nil)
            return true
        }
        if start == 0 { pthread_setspecific(key, UnsafeRawPointer(bitPattern: UInt(max(now, 1)))) }
        return false
    }
}
