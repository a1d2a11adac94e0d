import Foundation
import PausingVFS

/// One file operation on a watched folder, as the pausing test VFS (Tests/PausingVFS) saw it.
public struct VFSEvent: Sendable, CustomStringConvertible {
    /// The VFS call.
    public enum Operation: Int32, Sendable {
        case open = 1, close, read, write, truncate, sync, lock, unlock, shmMap, shmLock, shmUnmap, delete
    }

    /// Which of a database's files the call is about.
    public enum FileKind: Int32, Sendable {
        case database = 1, journal, wal, other
    }

    /// The event's place in its watch's order (0, 1, …): which of two events came first.
    public let sequence: Int
    public let operation: Operation
    /// `false` before the real call, `true` after it.
    public let after: Bool
    public let kind: FileKind
    public let path: String
    /// The lock level (SQLITE_LOCK_*), the shm lock flags (SQLITE_SHM_*), or the shm unmap's delete flag.
    public let level: Int32
    /// The read or write offset, the truncated size, the shm region or first lock slot.
    public let offset: Int64
    /// Bytes read or written, shm slots locked.
    public let amount: Int32
    /// After the call: its SQLite result code.
    public let result: Int32
    /// The open file (the `sqlite3_file` pointer), 0 for a delete: tells connections apart.
    public let file: UInt
    /// The calling thread's name (``VFSWatch/setActor(_:)``), if it has one.
    public let actor: String?

    /// A lock on the main database file taken to `level`, reported after it succeeded.
    public func isLockTaken(_ level: Int32) -> Bool {
        after && result == 0 && kind == .database && operation == .lock && self.level == level
    }

    public var description: String {
        let who = actor.map { "\($0): " } ?? ""
        let what: String
        switch operation {
        case .lock, .unlock: what = "\(operation) \(Self.lockName(level))"
        case .read, .write: what = "\(operation) \(amount) at \(offset)"
        case .truncate: what = "truncate to \(offset)"
        case .shmLock: what = "shmLock \(level & 1 != 0 ? "unlock" : "lock") \(level & 8 != 0 ? "EXCLUSIVE" : "SHARED") slots \(offset)+\(amount)"
        default: what = "\(operation)"
        }
        let outcome = after ? " → \(result)" : " (before)"
        return "#\(sequence) \(who)\(what) \(kind)\(outcome)"
    }

    static func lockName(_ level: Int32) -> String {
        ["NONE", "SHARED", "RESERVED", "PENDING", "EXCLUSIVE"][Int(max(0, min(4, level)))]
    }
}

/// SQLite's lock levels on a database file, for ``VFSEvent/level``.
public enum FileLockLevel {
    public static let none: Int32 = 0, shared: Int32 = 1, reserved: Int32 = 2, pending: Int32 = 3, exclusive: Int32 = 4
}

/// A point where one connection waits, inside a VFS call, until the test releases it.
///
/// Made by ``VFSWatch/pause(where:)``: the first event the predicate accepts (from any thread)
/// stops there. The test learns when the connection arrived (``waitUntilReached()``), does what it
/// wants to interleave, then ``release()``s it. Order comes from the events, never from a clock.
///
/// A signal (``VFSWatch/signal(where:)``) is a pause that does not stop the connection: it only
/// tells a waiting thread that the event happened.
public final class VFSPause: @unchecked Sendable {
    fileprivate let predicate: @Sendable (VFSEvent) -> Bool
    private let holds: Bool
    private let condition = NSCondition()
    private var reachedEvent: VFSEvent?
    private var released = false

    fileprivate init(predicate: @escaping @Sendable (VFSEvent) -> Bool, holds: Bool) {
        self.predicate = predicate
        self.holds = holds
    }

    /// The event the connection stopped at, once one did.
    public var reached: VFSEvent? { condition.withLock { reachedEvent } }

    /// Blocks until a connection stops here and returns that event; `nil` when none did within
    /// `limit`, a guard against a hang (a test fails then; it never takes an order from it).
    public func waitUntilReached(limit: Duration = .seconds(60)) -> VFSEvent? {
        let deadline = Date().addingTimeInterval(Double(limit.components.seconds))
        return condition.withLock {
            while reachedEvent == nil, !released {
                if !condition.wait(until: deadline) { break }
            }
            return reachedEvent
        }
    }

    /// Lets the stopped connection go on (or lets the first one that arrives go on at once), and
    /// ends ``waitUntilReached(limit:)`` whether or not a connection arrived: call it on every
    /// exit path of the code that was to reach the event.
    public func release() {
        condition.withLock {
            released = true
            condition.broadcast()
        }
    }

    /// Called on the connection's thread: stops it until ``release()``.
    fileprivate func arrive(_ event: VFSEvent) {
        condition.withLock {
            reachedEvent = event
            condition.broadcast()
            while holds, !released { condition.wait() }
        }
    }
}

/// Watches the files under one folder through the pausing test VFS: records every call made on
/// them, in order, and stops connections at chosen calls.
///
/// ```swift
/// let watch = VFSWatch(folder: directory.path)
/// defer { watch.stop() }
/// let pause = watch.pause { $0.actor == "rotator" && $0.isLockTaken(FileLockLevel.exclusive) }
/// Thread { VFSWatch.setActor("rotator"); rotate() }.start()
/// _ = pause.waitUntilReached()     // the rotator holds EXCLUSIVE now
/// … another connection tries the file …
/// pause.release()
/// ```
///
/// The VFS becomes the process's default SQLite VFS on first use; connections opened before
/// that are not seen. Files outside the folder pass through untouched.
public final class VFSWatch: @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [VFSEvent] = []
    private var pauses: [VFSPause] = []
    private var failures: [(predicate: @Sendable (VFSEvent) -> Bool, code: Int32)] = []
    private var token: Int32 = -1
    private var unretained: Unmanaged<VFSWatch>?
    /// When `false`, events are matched against pauses but not kept (long runs).
    public var recording = true

    /// Starts watching `folder` (an absolute path).
    public init(folder: String) {
        precondition(pausing_vfs_install() == 0, "the pausing test VFS could not be registered")
        let prefix = folder.hasSuffix("/") ? folder : folder + "/"
        let unmanaged = Unmanaged.passRetained(self)
        unretained = unmanaged
        token = pausing_vfs_watch(prefix, { context, event in
            guard let context, let event else { return 0 }
            return Unmanaged<VFSWatch>.fromOpaque(context).takeUnretainedValue().observe(event.pointee)
        }, unmanaged.toOpaque())
        precondition(token >= 0, "too many VFS watches at once")
    }

    /// Stops watching; releases every pause first, so that no connection stays stopped.
    public func stop() {
        let pending = lock.withLock { () -> [VFSPause] in
            defer { pauses.removeAll() }
            return pauses
        }
        pending.forEach { $0.release() }
        if token >= 0 { pausing_vfs_unwatch(token) }
        token = -1
        unretained?.release()
        unretained = nil
    }

    /// The events so far, in order.
    public var events: [VFSEvent] { lock.withLock { recorded } }

    /// Forgets the events recorded so far (sequence numbers go on).
    public func clearEvents() { lock.withLock { recorded.removeAll() } }

    /// Stops the first connection whose event `predicate` accepts, until the pause is released.
    public func pause(where predicate: @escaping @Sendable (VFSEvent) -> Bool) -> VFSPause {
        let pause = VFSPause(predicate: predicate, holds: true)
        lock.withLock { pauses.append(pause) }
        return pause
    }

    /// Tells a thread waiting in ``VFSPause/waitUntilReached(limit:)`` when the first event that
    /// `predicate` accepts has happened, without stopping the connection that caused it.
    public func signal(where predicate: @escaping @Sendable (VFSEvent) -> Bool) -> VFSPause {
        let pause = VFSPause(predicate: predicate, holds: false)
        lock.withLock { pauses.append(pause) }
        return pause
    }

    /// Fails, with SQLite result `code`, every call whose before-event `predicate` accepts.
    public func fail(with code: Int32, where predicate: @escaping @Sendable (VFSEvent) -> Bool) {
        lock.withLock { failures.append((predicate, code)) }
    }

    /// Names the calling thread in the events it causes from now on.
    public static func setActor(_ name: String?) {
        pausing_vfs_set_actor(name.map(ActorNames.shared.intern))
    }

    private var nextSequence = 0

    private func observe(_ raw: pausing_vfs_event) -> Int32 {
        let (event, pause, failure): (VFSEvent, VFSPause?, Int32?) = lock.withLock {
            let event = VFSEvent(
                sequence: nextSequence, operation: VFSEvent.Operation(rawValue: raw.operation) ?? .open, after: raw.after != 0,
                kind: VFSEvent.FileKind(rawValue: raw.kind) ?? .other, path: raw.path.map { String(cString: $0) } ?? "",
                level: raw.level, offset: raw.offset, amount: raw.amount, result: raw.result,
                file: UInt(bitPattern: raw.file), actor: raw.actor.map { String(cString: $0) })
            nextSequence += 1
            if recording { recorded.append(event) }
            let index = pauses.firstIndex { $0.predicate(event) }
            let pause = index.map { pauses.remove(at: $0) }
            let failure = event.after ? nil : failures.first { $0.predicate(event) }?.code
            return (event, pause, failure)
        }
        pause?.arrive(event)
        if let failure { return failure }
        return raw.after != 0 ? raw.result : 0
    }
}

/// C strings for actor names that live as long as the process (the VFS keeps the pointer).
private final class ActorNames: @unchecked Sendable {
    static let shared = ActorNames()
    private let lock = NSLock()
    private var names: [String: UnsafeMutablePointer<CChar>] = [:]

    func intern(_ name: String) -> UnsafePointer<CChar> {
        lock.withLock {
            if let known = names[name] { return UnsafePointer(known) }
            let copy = strdup(name)!
            names[name] = copy
            return UnsafePointer(copy)
        }
    }
}

// MARK: Every pause point

/// One round of ``VFSWatch/everyPausePoint(actor:counting:prepare:meanwhile:)``: where the work
/// was stopped, what was done meanwhile, and what the work returned.
public struct PausePointRound<Meanwhile, Outcome> {
    /// The pause point's number: the work stopped after this many counted events (0 is the first).
    public let point: Int
    /// The event the work was stopped at.
    public let event: VFSEvent
    public let meanwhile: Meanwhile
    public let outcome: Outcome
}

extension VFSWatch {
    /// Runs the same work once per pause point, stopping it at each in turn: round `n` stops the
    /// work after its `n`-th event that `counting` accepts (events of the thread named `actor`),
    /// runs `meanwhile` on the calling thread while it is stopped, then lets it finish. Rounds go
    /// on until the work finishes without reaching the point, so every counted event of the work
    /// is a pause point once. Work that behaves the same each time (the same files, the same
    /// calls) makes the rounds replay exactly; a failing round is named by its point.
    ///
    /// - Parameters:
    ///   - prepare: sets the files up for a round and returns the work, run on another thread.
    ///   - meanwhile: what another connection does while the work is stopped at `event`.
    ///   - inspect: called after the work finished, before the next round's `prepare`.
    ///   - actor: the name the work's thread runs under; `nil` leaves it unnamed, so that the
    ///     library's own threads that the work starts (a background rotation) count too. Then
    ///     `meanwhile` must name its thread (``setActor(_:)``) for its events not to count.
    public func everyPausePoint<Meanwhile, Outcome>(
        actor: String?, counting: @escaping @Sendable (VFSEvent) -> Bool = { $0.after }, limit: Int = 100_000,
        prepare: () throws -> () -> Outcome, meanwhile: (VFSEvent) throws -> Meanwhile,
        inspect: (PausePointRound<Meanwhile, Outcome>) throws -> Void = { _ in }
    ) throws -> [PausePointRound<Meanwhile, Outcome>] {
        var rounds: [PausePointRound<Meanwhile, Outcome>] = []
        for point in 0..<limit {
            // Rounds keep only what they return: the events of earlier rounds would grow with
            // every point (quadratically over a run).
            clearEvents()
            let work = UncheckedWork(try prepare())
            let counter = PointCounter(stopAt: point)
            let pause = self.pause { $0.actor == actor && counting($0) && counter.next() }
            let finished = DispatchSemaphore(value: 0)
            Thread {
                if let actor { VFSWatch.setActor(actor) }
                defer {
                    VFSWatch.setActor(nil)
                    pause.release()
                    finished.signal()
                }
                work.run()
            }.start()
            let stoppedAt = pause.waitUntilReached()
            // The meanwhile step runs under no name, so that its own events never count.
            let done = try stoppedAt.map { try meanwhile($0) }
            pause.release()
            finished.wait()
            guard let stoppedAt, let done, let outcome = work.outcome else { break }
            let round = PausePointRound(point: point, event: stoppedAt, meanwhile: done, outcome: outcome)
            try inspect(round)
            rounds.append(round)
        }
        return rounds
    }
}

/// A round's work, handed to its thread; its outcome is read after the thread finished.
private final class UncheckedWork<Outcome>: @unchecked Sendable {
    private let body: () -> Outcome
    var outcome: Outcome?

    init(_ body: @escaping () -> Outcome) { self.body = body }

    func run() { outcome = body() }
}

/// Counts the events a pause's predicate accepts; says yes at the `stopAt`-th (from 0).
private final class PointCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var seen = 0
    private let stopAt: Int

    init(stopAt: Int) { self.stopAt = stopAt }

    func next() -> Bool {
        lock.withLock {
            defer { seen += 1 }
            return seen == stopAt
        }
    }
}

// MARK: A child process stopped for good

extension VFSWatch {
    /// For a child process a test kills at a chosen point (the crash harness calls this first):
    /// with `PAUSING_VFS_FOLDER=<folder>` and `PAUSING_VFS_STOP_AT=<n>` in the environment, the
    /// process's `n`-th VFS call on a database, journal or WAL file in that folder (reads not
    /// counted; 0 is the first), reported after it returned, prints `paused <n> <event>` on
    /// standard output and never returns: the test kills the process there. Without them,
    /// nothing happens.
    public static func stopFromEnvironment() {
        let environment = ProcessInfo.processInfo.environment
        guard let folder = environment["PAUSING_VFS_FOLDER"], let stopAt = environment["PAUSING_VFS_STOP_AT"].flatMap(Int.init) else { return }
        let watch = VFSWatch(folder: folder)
        watch.recording = false
        let counter = PointCounter(stopAt: stopAt)
        let pause = watch.pause { $0.after && $0.operation != .read && $0.kind != .other && counter.next() }
        Thread {
            guard let event = pause.waitUntilReached(limit: .seconds(3600)) else { return }
            FileHandle.standardOutput.write(Data("paused \(stopAt) \(event)\n".utf8))
        }.start()
    }
}
