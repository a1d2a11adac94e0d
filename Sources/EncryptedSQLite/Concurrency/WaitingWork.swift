import DurableFiles
import Foundation

/// One async caller's work waiting for a connection: it starts at most once, or is given up before
/// it starts (its deadline passed, its task was cancelled, the database closed), and its caller is
/// resumed exactly once either way.
///
/// The thread that would run the work calls ``start()`` first and runs it only on `true`; the
/// caller's deadline and cancellation call ``giveUp(_:)``, which resumes the caller at once with
/// the error even while the connection's thread is still blocked behind a rotation. Work given up
/// never runs, so the caller's error always means "nothing was done".
///
/// ```swift
/// let work = WaitingWork(resume: { error in … })
/// work.giveUp(after: .seconds(2), with: .writerWaitExpired(path: path, waited: .seconds(2)))
/// queue.async { if work.start() { …; work.end(nil) } }
/// ```
final class WaitingWork: Sendable {
    private enum State {
        case waiting
        case running
        case ended
    }
    private let state = Locked(State.waiting)
    /// Runs once, when the work stops waiting (it starts, is given up, or ends unstarted).
    private let leaving = Locked<(@Sendable () -> Void)?>(nil)
    private let resume: @Sendable ((any Error)?) -> Void

    /// `resume` resumes the caller: with `nil` once the work ran, or with the error that ended it.
    init(resume: @escaping @Sendable ((any Error)?) -> Void) {
        self.resume = resume
    }

    /// Runs `body` once the work stops waiting (for a count of the callers waiting now).
    func whenLeavingWait(_ body: @escaping @Sendable () -> Void) {
        leaving.withLock { $0 = body }
    }

    /// Calls the `whenLeavingWait` closure, once.
    private func leftWait() {
        leaving.withLock { body in
            defer { body = nil }
            return body
        }?()
    }

    /// Gives the work up with `error` once `limit` passes unless it started by then; no limit: never.
    func giveUp(after limit: Duration?, with error: @escaping @autoclosure @Sendable () -> any Error) {
        guard let limit else { return }
        let (seconds, attoseconds) = limit.components
        let nanoseconds = max(0, Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))
        // Weak: work that ended is not kept for the rest of the limit; a timer that fires after
        // the work started does nothing.
        BlockingWork.timers.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak self] in self?.giveUp(error()) }
    }

    /// On the connection's thread: `true` when the work may run now (it was not given up); the
    /// caller then calls ``end(_:)`` once it ran.
    func start() -> Bool {
        let started = state.withLock { state in
            guard case .waiting = state else { return false }
            state = .running
            return true
        }
        if started { leftWait() }
        return started
    }

    /// ``start()`` inside an access's closure: throws when the work was given up (the access
    /// then ends without doing anything, and its caller was resumed already).
    func mustStart() throws {
        guard start() else { throw GivenUp() }
    }

    /// What ``mustStart()`` throws; no caller ever sees it.
    struct GivenUp: Error {}

    /// Whether the work was given up before it started.
    var wasGivenUp: Bool {
        state.withLock { if case .ended = $0 { true } else { false } }
    }

    /// Resumes the caller after the work ran (with its error, or with `nil`), or when what had to
    /// come before it failed (a `BEGIN` that found the file locked: that error). Does nothing for
    /// work given up: its caller was resumed then.
    func end(_ error: (any Error)?) {
        let ends = state.withLock { state in
            if case .ended = state { return false }
            state = .ended
            return true
        }
        if ends {
            leftWait()
            resume(error)
        }
    }

    /// Resumes the caller with `error` unless the work started already (then it runs to its end).
    func giveUp(_ error: any Error) {
        let gaveUp = state.withLock { state in
            guard case .waiting = state else { return false }
            state = .ended
            return true
        }
        if gaveUp {
            leftWait()
            resume(error)
        }
    }
}

extension WaitingWork {
    /// Runs `submit` with a new waiting work whose caller is the current task: suspends until the
    /// work ends or is given up (after `limit`, with `expired`; on the task's cancellation, with
    /// `CancellationError`). `submit` hands the work to the thread that will run it.
    static func wait(
        limit: Duration?, expired: @escaping @autoclosure @Sendable () -> any Error,
        _ submit: (WaitingWork) -> Void
    ) async throws {
        let box = Locked<WaitingWork?>(nil)
        try await withTaskCancellationHandler {
            // Checked, as in `EncryptedDatabase.run(on:_:)`: ThreadSanitizer does not see the
            // unchecked form's ordering.
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let work = WaitingWork { error in
                    if let error { continuation.resume(throwing: error) } else { continuation.resume() }
                }
                box.withLock { $0 = work }
                if Task.isCancelled {
                    work.giveUp(CancellationError())
                    return
                }
                work.giveUp(after: limit, with: expired())
                submit(work)
            }
        } onCancel: {
            box.withLock { $0 }?.giveUp(CancellationError())
        }
    }
}
