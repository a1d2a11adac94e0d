import DurableFiles
import Foundation
import SQLCipherConnection

/// The writer, held for the async body of ``EncryptedDatabase/writeTransaction(waitingAtMost:_:)``:
/// each ``run(_:)`` runs its closure on the writer connection, inside the one `IMMEDIATE`
/// transaction that commits when the body returns and rolls back when it throws.
///
/// Between two `run` calls the body may await anything (another service, a pooled read); the
/// writer stays held, so no other write of this database runs meanwhile. A session is valid only
/// inside its body.
///
/// ```swift
/// let id = try await database.writeTransaction { session in
///     let id = try await session.run { db in
///         try db.execute("INSERT INTO authors(name) VALUES (?)", ["Ada"])
///         return db.lastInsertRowID
///     }
///     let title = try await titleService.suggest(for: id)   // the writer stays held
///     try await session.run { db in try db.execute("INSERT INTO books(author, title) VALUES (?, ?)", [id, title]) }
///     return id
/// }
/// ```
public final class WriteSession: Sendable {
    private enum Command: Sendable {
        case work(@Sendable (Connection) -> Void)
        case end(commit: Bool)
    }
    private struct Mailbox {
        var commands: [Command] = []
        /// `false` once the body ended: later `run` calls fail instead of waiting forever.
        var open = true
        /// The body's wait for the writer, until the writer thread starts serving.
        var started: CheckedContinuation<Void, any Error>?
        /// The wait for the commit or rollback, and its outcome when it came first.
        var ended: CheckedContinuation<Void, any Error>?
        var outcome: Result<Void, any Error>?
    }
    private let mailbox = Locked(Mailbox())
    private let signal = DispatchSemaphore(value: 0)
    /// The database path, for errors.
    let path: String

    init(path: String) {
        self.path = path
    }

    /// Runs `work` on the writer connection, inside the session's transaction, and returns its
    /// value. Nested `Connection.transaction` calls in `work` become savepoints.
    /// - Throws: whatever `work` throws (the transaction goes on: throw from the body to roll it
    ///   back); ``EncryptedDatabaseError/transactionEnded(path:)`` when called after the body ended.
    public func run<R: Sendable>(_ work: @escaping @Sendable (Connection) throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<R, any Error>) in
            let posted = mailbox.withLock { mailbox in
                guard mailbox.open else { return false }
                mailbox.commands.append(.work { db in continuation.resume(with: Result { try work(db) }) })
                return true
            }
            if posted {
                signal.signal()
            } else {
                continuation.resume(throwing: EncryptedDatabaseError.transactionEnded(path: path))
            }
        }
    }

    // MARK: The holder's side

    /// Before the session is queued: the continuation the body's start waits on.
    func awaitStart(_ continuation: CheckedContinuation<Void, any Error>) {
        mailbox.withLock { $0.started = continuation }
    }

    /// On the writer thread, inside the transaction: lets the body start, then runs what it posts
    /// until it ends; returns to commit, throws to roll back.
    func serve(_ db: Connection) throws {
        mailbox.withLock { mailbox in
            let started = mailbox.started
            mailbox.started = nil
            return started
        }?.resume()
        while true {
            signal.wait()
            let command = mailbox.withLock { $0.commands.removeFirst() }
            switch command {
            case .work(let work):
                work(db)
            case .end(let commit):
                if commit { return }
                throw RolledBack()
            }
        }
    }

    /// The holder's work ended (committed, rolled back, or never started: given up, or `BEGIN`
    /// failed): resumes whichever side waits.
    func holderEnded(_ error: (any Error)?) {
        let (started, ended) = mailbox.withLock { mailbox in
            mailbox.open = false
            let started = mailbox.started
            mailbox.started = nil
            let ended = mailbox.ended
            mailbox.ended = nil
            if started == nil, ended == nil { mailbox.outcome = error.map { .failure($0) } ?? .success(()) }
            return (started, ended)
        }
        if let started {
            // The body never started: the error says why (deadline, cancellation, BEGIN).
            started.resume(throwing: error ?? CancellationError())
        } else if let ended {
            if let error { ended.resume(throwing: error) } else { ended.resume() }
        }
    }

    /// After the body: asks the writer thread to commit (or roll back) and waits until it did.
    /// - Throws: the commit's error.
    func end(commit: Bool) async throws {
        let posted = mailbox.withLock { mailbox in
            guard mailbox.open else { return false }
            mailbox.open = false
            mailbox.commands.append(.end(commit: commit))
            return true
        }
        if posted { signal.signal() }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let outcome = mailbox.withLock { mailbox in
                if mailbox.outcome == nil { mailbox.ended = continuation }
                return mailbox.outcome
            }
            if let outcome { continuation.resume(with: outcome) }
        }
    }

    /// The holder's error when the body threw: the transaction rolled back.
    struct RolledBack: Error {}

    /// A database whose writer a task holds for a body.
    struct Holder: Sendable, Equatable {
        let database: ObjectIdentifier
        /// The body's task (its identity, never dereferenced): only that task's own calls are
        /// stopped. Task locals are copied into the tasks it creates, which may well wait.
        let task: Int
    }

    /// The bodies the current task is inside, so that an access of the body's own task that would
    /// wait for the writer it holds stops at once instead of waiting forever.
    @TaskLocal static var held: [Holder] = []

    /// The current task's identity, or 0 outside a task.
    static var currentTask: Int { withUnsafeCurrentTask { $0?.hashValue ?? 0 } }
}
