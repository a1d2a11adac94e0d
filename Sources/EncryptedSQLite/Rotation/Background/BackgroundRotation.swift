import DurableFiles
import Foundation

/// A rotation running in the background while its database serves
/// (``OpenOptions/backgroundRotation``, ``EncryptedDatabase/rotateInBackground()``): its progress,
/// its events, and its outcome.
///
/// ```swift
/// var options = OpenOptions(concurrentReaders: 4)
/// options.backgroundRotation = true
/// let database = try EncryptedDatabase(path: "app.sqlite", keysFile: "Keys", options: options)
/// // The database serves at once, on the key that opened it.
/// if let rotation = database.backgroundRotation {
///     Task {
///         for await event in rotation.events() { logger.info("\(event)") }
///     }
///     let report = try await rotation.result()   // the file is on the current key now
///     print(report.background?.swapPause ?? .zero)
/// }
/// ```
///
/// The database stays open while the rotation runs, even when the last reference to it is
/// dropped: it closes when the rotation ends. ``cancel()`` ends it early, leaving the file on
/// its old key.
public final class BackgroundRotation: Sendable {
    /// Where the rotation is.
    public enum State: Sendable, Equatable {
        /// Copying the database into the new file (or waiting to begin).
        case copying(BackgroundRotationProgress)
        /// The file is on the new key (``RotationReport/method`` tells whether it was the
        /// background copy or, with ``RotationReport/fallbackReason``, an ordinary rotation).
        case finished(RotationReport)
        /// The rotation failed; the file is on its old key unless the error says otherwise.
        case failed(EncryptedDatabaseError)
        /// ``cancel()`` or another rotation (a foreground one, or another process's) ended it;
        /// the file was left as that left it.
        case abandoned(reason: String)
    }

    /// The database file.
    public let path: String
    /// The key the file is on while the rotation runs.
    public let fromKeyID: String
    /// The key it rotates to.
    public let toKeyID: String

    private let shared = Locked(Shared())
    /// Broadcast when the state becomes final: what a thread that is not a task waits on.
    private let ending = NSCondition()

    private struct Shared {
        var state: State = .copying(BackgroundRotationProgress(copiedPages: 0, totalPages: 0, elapsed: .zero))
        var watchers: [UUID: AsyncStream<State>.Continuation] = [:]
        var waiters: [CheckedContinuation<RotationReport, any Error>] = []
        var cancelled = false
    }

    init(path: String, fromKeyID: String, toKeyID: String) {
        self.path = path
        self.fromKeyID = fromKeyID
        self.toKeyID = toKeyID
    }

    /// Where the rotation is now.
    public var state: State { shared.withLock { $0.state } }

    /// The rotation's states from now on, starting with the current one and ending after
    /// ``State/finished(_:)``, ``State/failed(_:)`` or ``State/abandoned(reason:)``. Each call
    /// makes a new sequence; a slow consumer sees the latest progress (older progress states are
    /// dropped, the final state never).
    public func events() -> AsyncStream<State> {
        let (stream, continuation) = AsyncStream<State>.makeStream(bufferingPolicy: .bufferingNewest(8))
        let id = UUID()
        let current: State? = shared.withLock { shared in
            if !shared.state.isFinal { shared.watchers[id] = continuation }
            return shared.state
        }
        if let current { continuation.yield(current) }
        if current?.isFinal == true { continuation.finish() }
        continuation.onTermination = { [weak self] _ in _ = self?.shared.withLock { $0.watchers.removeValue(forKey: id) } }
        return stream
    }

    /// Waits for the rotation to end.
    /// - Returns: the rotation's report.
    /// - Throws: the ``EncryptedDatabaseError`` it failed with;
    ///   ``EncryptedDatabaseError/rotationNotApplied(path:fromKeyID:toKeyID:detail:)`` when it was
    ///   abandoned.
    public func result() async throws -> RotationReport {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<RotationReport, any Error>) in
            let final: State? = shared.withLock { shared in
                if shared.state.isFinal { return shared.state }
                shared.waiters.append(continuation)
                return nil
            }
            if let final { continuation.resume(with: outcome(of: final)) }
        }
    }

    /// Asks the rotation to stop: a copy in progress is discarded and the file stays on its old
    /// key. A swap already under way completes. Returns at once; ``result()`` reports the end.
    public func cancel() {
        shared.withLock { $0.cancelled = true }
    }

    // MARK: Driver side

    /// `true` once ``cancel()`` was called.
    var isCancelled: Bool { shared.withLock { $0.cancelled } }

    /// Records a new state and tells the watchers (and, for a final state, the waiters). A final
    /// state is never replaced.
    func update(_ state: State) {
        let (watchers, waiters, ended): ([AsyncStream<State>.Continuation], [CheckedContinuation<RotationReport, any Error>], Bool) = shared.withLock { shared in
            guard !shared.state.isFinal else { return ([], [], false) }
            shared.state = state
            let watchers = Array(shared.watchers.values)
            guard state.isFinal else { return (watchers, [], false) }
            shared.watchers.removeAll()
            defer { shared.waiters.removeAll() }
            return (watchers, shared.waiters, true)
        }
        for watcher in watchers {
            watcher.yield(state)
            if state.isFinal { watcher.finish() }
        }
        for waiter in waiters { waiter.resume(with: outcome(of: state)) }
        if ended { ending.withLock { ending.broadcast() } }
    }

    /// Blocks the calling thread until the rotation ended (finished, failed or abandoned): for
    /// code that is not async (the sync `close()`), without a task that would need a thread of the
    /// cooperative pool while this one blocks.
    func waitUntilEnded() {
        ending.withLock {
            while !state.isFinal { ending.wait() }
        }
    }

    private func outcome(of state: State) -> Result<RotationReport, any Error> {
        switch state {
        case .finished(let report): return .success(report)
        case .failed(let error): return .failure(error)
        case .abandoned(let reason):
            return .failure(EncryptedDatabaseError.rotationNotApplied(path: path, fromKeyID: fromKeyID, toKeyID: toKeyID, detail: "the background rotation was abandoned: \(reason)"))
        case .copying:
            return .failure(EncryptedDatabaseError.rotationNotApplied(path: path, fromKeyID: fromKeyID, toKeyID: toKeyID, detail: "the background rotation has not ended"))
        }
    }
}

extension BackgroundRotation.State {
    /// `true` for the states a rotation ends in (all but ``copying(_:)``).
    public var isFinal: Bool {
        if case .copying = self { return false }
        return true
    }
}

/// How far a background copy is.
///
/// ```swift
/// if case .copying(let progress) = rotation.state {
///     print("\(Int(progress.fraction * 100))% copied in \(progress.elapsed)")
/// }
/// ```
public struct BackgroundRotationProgress: Sendable, Equatable {
    /// Pages copied into the new file so far.
    public let copiedPages: Int
    /// The database's size in pages at the last step (it changes as the service writes).
    public let totalPages: Int
    /// Since the copy began.
    public let elapsed: Duration

    /// The fraction copied, from 0 to 1.
    public var fraction: Double { totalPages == 0 ? 0 : min(1, Double(copiedPages) / Double(totalPages)) }
}
