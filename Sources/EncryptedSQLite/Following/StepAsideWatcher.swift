import DurableFiles
import Foundation

/// The thread that makes idle databases step aside: a database steps aside at the start of its
/// next access, and this thread, which checks every open database's ``StepAsideLock`` every 20
/// ms (one `fcntl` each), starts that work for a database that has none running. So a process
/// replacing the file waits at most about that long for a database nobody uses. The thread ends
/// about a second after the last database closed.
///
/// The watcher never holds a database while it holds its lock: the strong reference it takes to
/// check one can be the last, and the database's `deinit` then calls ``forget(_:)`` on this
/// thread, which takes the lock.
final class StepAsideWatcher: @unchecked Sendable {
    static let shared = StepAsideWatcher()

    private final class Entry: Sendable {
        // Read without the watcher's lock: loading it makes a strong reference.
        nonisolated(unsafe) weak var database: RotationFollower?
        /// `true` while a step aside started for it runs.
        let busy = Locked(false)
        init(_ database: RotationFollower) { self.database = database }
    }

    private let lock = NSLock()
    // Invariant: `entries` and `running` are only touched with `lock` held, and no database is
    // held (nor released) with it held.
    private var entries: [ObjectIdentifier: Entry] = [:]
    private var running = false

    /// For tests: called on the watcher's thread with each open database it checks, while it
    /// holds that database (and not its lock).
    static let checking = Locked<(@Sendable (RotationFollower) -> Void)?>(nil)

    /// Watches `database` until it is closed.
    func watch(_ database: RotationFollower) {
        let entry = Entry(database)
        let start: Bool = lock.withLock {
            entries[ObjectIdentifier(database)] = entry
            defer { running = true }
            return !running
        }
        if start {
            let thread = Thread { [self] in run() }
            thread.name = "EncryptedSQLite.StepAsideWatcher"
            thread.start()
        }
    }

    /// Stops watching the database with this identity (from its `deinit`).
    func forget(_ identity: ObjectIdentifier) {
        let removed = lock.withLock { entries.removeValue(forKey: identity) }
        _ = removed  // released after the lock
    }

    /// How many polls in a row with no open database end the thread (about 1 s): a process that
    /// opens and closes databases one after the other keeps one thread instead of starting one
    /// every few opens (a thread start cost about as much as the rest of an open's own work).
    static let idlePollsBeforeExit = 50

    private func run() {
        var idlePolls = 0
        while true {
            let watched: [Entry]? = lock.withLock {
                if entries.isEmpty {
                    idlePolls += 1
                    if idlePolls >= Self.idlePollsBeforeExit { running = false }
                    return idlePolls >= Self.idlePollsBeforeExit ? nil : []
                }
                idlePolls = 0
                return Array(entries.values)
            }
            guard let watched else { return }
            for entry in watched {
                check(entry)  // each database is released as `check` returns, without the lock
            }
            usleep(20_000)  // a poll interval, not an order: an access steps aside without waiting for it
        }
    }

    private func check(_ entry: Entry) {
        guard let database = entry.database else { return }
        if let checking = Self.checking.withLock({ $0 }) { checking(database) }
        guard database.stepAside?.isAsked == true else { return }
        let claimed = entry.busy.withLock { busy in
            defer { busy = true }
            return !busy
        }
        guard claimed else { return }
        BlockingWork.detached(label: "EncryptedSQLite.stepAside") {
            try? database.stepAsideIfAsked()
            entry.busy.withLock { $0 = false }
        }
    }
}
