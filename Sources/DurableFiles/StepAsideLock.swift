import Foundation

/// The lock file beside a database (`<database>-lock`) through which the library's processes step
/// aside while another one replaces the database file (an export: encrypting, upgrading, changing
/// cipher settings), so that the replacing process can prove sole use and nobody goes on using
/// the file it replaces.
///
/// Two bytes of this file carry the protocol, with open file description locks (so two
/// databases of one process take part as two processes would):
/// - **presence** (byte 1): every open database holds a read lock on it while it has
///   connections to the file;
/// - **intent** (byte 0): a process about to replace the file holds a write lock on it from
///   before it takes the file over until the new file is in place.
///
/// A database enters (``enter()``) by waiting for a read lock on intent, taking its presence,
/// and letting intent go; so no database enters while a replacement is under way. A database that
/// finds intent held (``isAsked``) closes its connections, leaves, and enters again (which waits
/// until the new file is in place), then opens the new file. The replacing process
/// (``announce(within:)``) takes intent, then a write lock on presence, which it gets once every
/// other database has stepped aside. The Architecture article's rotation protocol has the whole
/// state machine.
///
/// The file is created beside an existing database, with its mode and owner, and never removed:
/// removing it while another process has it open would split the protocol in two.
package final class StepAsideLock: @unchecked Sendable {
    /// The lock file's name is the database's plus this.
    package static let suffix = "-lock"
    static let intentByte: Int64 = 0
    static let presenceByte: Int64 = 1

    /// What ``announce(within:)`` found.
    package enum Announcement: Equatable {
        /// Every other database stepped aside; intent and presence are held until ``withdraw()``.
        case clear
        /// Another process holds intent: it is replacing the file now.
        case replacingElsewhere
        /// Other databases still had the file open when the time was up. Nothing is held.
        case stillInUse
    }

    private let descriptor: Int32
    // Guards `present` and `announced`: a database steps aside from one thread at a time, but
    // `isAsked` is read from any thread.
    private let state = NSLock()
    private var present = false
    private var announced = false

    /// Opens the lock file of the database at `databasePath`, creating it (with the database's
    /// mode and owner) when `create` is set and the database exists; `nil` when it is missing and
    /// not created, or cannot be opened (a read-only folder): the database then takes no part
    /// in the protocol, and a process replacing the file finds it open and refuses.
    package init?(databasePath: String, create: Bool) {
        let path = databasePath + Self.suffix
        var descriptor = open(path, O_RDWR | O_CLOEXEC)
        if descriptor < 0, errno == EACCES || errno == EROFS { descriptor = open(path, O_RDONLY | O_CLOEXEC) }
        if descriptor < 0, errno == ENOENT, create, let mode = FileSystem.permissions(of: databasePath) {
            descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, mode)
            if descriptor >= 0 {
                _ = fchmod(descriptor, mode)
                var status = stat()
                if stat(databasePath, &status) == 0 {
                    _ = fchown(descriptor, status.st_uid, status.st_gid)  // only root may give it away; ignore EPERM
                }
            }
        }
        guard descriptor >= 0 else { return nil }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    /// Waits while another process replaces the file, then holds this database's presence.
    /// Does nothing when it is already held.
    package func enter() {
        state.withLock {
            guard !present else { return }
            guard OpenFileLock.wait(descriptor, byte: Self.intentByte, type: F_RDLCK) else { return }
            // No process can hold intent now, and none takes presence for writing without it.
            present = OpenFileLock.set(descriptor, byte: Self.presenceByte, type: F_RDLCK)
            _ = OpenFileLock.set(descriptor, byte: Self.intentByte, type: F_UNLCK)
        }
    }

    /// Gives up this database's presence (once its connections to the file are closed).
    package func leave() {
        state.withLock {
            guard present, !announced else { return }
            _ = OpenFileLock.set(descriptor, byte: Self.presenceByte, type: F_UNLCK)
            present = false
        }
    }

    /// `true` when another process holds intent: this database should step aside.
    package var isAsked: Bool {
        OpenFileLock.conflict(descriptor, byte: Self.intentByte, type: F_RDLCK) != nil
    }

    /// Takes intent, then waits up to `within` for every other database to step aside.
    package func announce(within: Duration) -> Announcement {
        state.withLock {
            let deadline = ContinuousClock.now + within
            var pause: UInt32 = 500
            func waitABit() {
                usleep(pause)
                pause = min(pause * 2, 20_000)
            }
            // A database that is entering holds intent for reading for a moment; a replacing
            // process holds it for writing.
            while !OpenFileLock.set(descriptor, byte: Self.intentByte, type: F_WRLCK) {
                if OpenFileLock.conflict(descriptor, byte: Self.intentByte, type: F_WRLCK) == F_WRLCK { return .replacingElsewhere }
                if ContinuousClock.now >= deadline { return .stillInUse }
                waitABit()
            }
            while !OpenFileLock.set(descriptor, byte: Self.presenceByte, type: F_WRLCK) {
                if ContinuousClock.now >= deadline {
                    _ = OpenFileLock.set(descriptor, byte: Self.presenceByte, type: present ? F_RDLCK : F_UNLCK)
                    _ = OpenFileLock.set(descriptor, byte: Self.intentByte, type: F_UNLCK)
                    return .stillInUse
                }
                waitABit()
            }
            announced = true
            return .clear
        }
    }

    /// Ends what ``announce(within:)`` began: the other databases enter again and open the new file.
    package func withdraw() {
        state.withLock {
            guard announced else { return }
            _ = OpenFileLock.set(descriptor, byte: Self.presenceByte, type: present ? F_RDLCK : F_UNLCK)
            _ = OpenFileLock.set(descriptor, byte: Self.intentByte, type: F_UNLCK)
            announced = false
        }
    }
}
