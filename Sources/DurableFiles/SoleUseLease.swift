import Foundation

/// Proof that no process but this one has a file open, held while a file is swapped under its
/// name: a Linux write lease (`fcntl(F_SETLEASE, F_WRLCK)`), which the kernel grants only while
/// no other descriptor of the file is open, in any process, this one included.
///
/// While the lease is held, another process's `open` of the file waits (up to the kernel's
/// `lease-break-time`) until it is released. Such an opener already resolved the name to the file
/// being replaced, so before releasing, the holder makes that file unreadable
/// (``overwriteStart(bytes:)``) and locks it (``lock(start:length:exclusive:)``), keeping the
/// descriptor (``releaseKeepingOpen()``) while the late opener has the file open
/// (``ReplacedFile/waitForOtherOpeners(limit:)``): the late opener then fails, instead of reading
/// or writing a file that is no longer the database.
///
/// Open this only when this process holds no descriptor of the file
/// (``descriptorsInThisProcess(of:)`` is 0): closing a descriptor drops every POSIX lock the
/// process holds on the file, SQLite's included.
package final class SoleUseLease {
    /// What ``acquire(_:)`` found.
    package enum Outcome {
        /// No other descriptor of the file is open; the lease is held until ``release()``.
        case held(SoleUseLease)
        /// Another descriptor of the file is open (another process has it open).
        case openElsewhere
        /// The lease cannot be taken here (not the file's owner and no `CAP_LEASE`, a file system
        /// without leases), so whether others have the file open cannot be proven.
        case unprovable(String)
    }

    private var descriptor: Int32
    /// How many bytes from the start ``overwriteStart(bytes:)`` zeroed, once it succeeded.
    private var zeroed: Int?
    /// The byte the ``Gate`` this lease was taken from keeps locked, until ``openGate()``.
    private var gateByte: Int64?

    private init(descriptor: Int32, gateByte: Int64? = nil) {
        self.descriptor = descriptor
        self.gateByte = gateByte
    }

    deinit { release() }

    // Linux values (<fcntl.h>, _GNU_SOURCE), which Glibc's module does not export.
    fileprivate static let setLease: Int32 = 1024
    fileprivate static let setSignal: Int32 = 10

    /// A descriptor of the file, opened while this process still has its connections to it, with
    /// a write lock on one of SQLite's lock bytes that belongs to the descriptor (an open file
    /// description lock), not to the process: closing the connections' descriptors, which drops
    /// every lock the process holds on the file, keeps it.
    ///
    /// Locking SQLite's PENDING byte this way keeps every connection, in any process, from
    /// starting a transaction: SQLite reads that byte before it takes a SHARED lock. Between the
    /// moment this process closes its last connection and the moment the lease proves nobody else
    /// has the file open, another process could otherwise open the file, commit and close again,
    /// leaving no descriptor for the lease to see and a commit that the swap would lose.
    ///
    /// Open it while the process's connections hold no lock on that byte (between transactions);
    /// close it (``close()``, or through the lease) only after they are closed, since closing any
    /// descriptor of the file drops the process's POSIX locks.
    package final class Gate {
        fileprivate var descriptor: Int32
        fileprivate let byte: Int64
        /// Why the byte could not be locked (another connection is starting a transaction or
        /// holds a lock on it, or the file system has no such locks); `nil` when it is locked.
        package let refusal: String?

        /// Opens `path` and locks `byte` for this descriptor.
        package init(_ path: String, byte: Int64) {
            self.byte = byte
            descriptor = open(path, O_RDWR | O_CLOEXEC)
            guard descriptor >= 0 else {
                refusal = "cannot open the file: \(String(cString: strerror(errno)))"
                return
            }
            // SQLite holds the byte only for a moment while a connection takes SHARED (and while
            // a writer waits for readers to finish): try again for up to about 100 ms.
            var code: Int32 = 0
            for attempt in 0..<50 {
                if attempt > 0 { usleep(2000) }
                if OpenFileLock.set(descriptor, byte: byte, type: F_WRLCK) {
                    refusal = nil
                    return
                }
                code = errno
                guard code == EAGAIN || code == EACCES else { break }
            }
            refusal = code == EAGAIN || code == EACCES
                ? "another connection kept starting transactions on the file"
                : "the file system refused an open file description lock (\(String(cString: strerror(code))))"
        }

        deinit { close() }

        /// Takes a write lease through this descriptor, as ``SoleUseLease/acquire(_:attempts:)``
        /// does; the lease keeps the descriptor and the lock (see ``SoleUseLease/openGate()``).
        /// Call it once this process's own connections to the file are closed.
        ///
        /// A refused lease is tried again, 1 ms after the first and twice as long after each next,
        /// about 0.25 s in all with the default 9 attempts: a child that another thread of this
        /// process is starting holds a copy of every descriptor until its `exec` closes them, the
        /// connections' just closed ones too, and that copy counts as an open of the file. On a
        /// loaded 2-core machine, 5 attempts 2 ms apart did not outlast such a start (a test
        /// suite that starts processes from many threads got "another process has the file open"
        /// for files no other process used). The gate's lock keeps every connection out meanwhile.
        package func lease(attempts: Int = 9) -> Outcome {
            guard descriptor >= 0, refusal == nil else { return .unprovable(refusal ?? "the gate is closed") }
            let gate = descriptor, byte = self.byte
            let outcome = SoleUseLease.retrying(attempts) { SoleUseLease.lease(gate, gateByte: byte) }
            if case .held = outcome { descriptor = -1 }
            return outcome
        }

        /// Closes the descriptor, which releases the lock. Safe to call more than once. Only
        /// when no other connection of this process has the file open (see ``keepOpen()``).
        package func close() {
            guard descriptor >= 0 else { return }
            closeDescriptor(descriptor)
            descriptor = -1
        }

        /// Releases the lock but keeps the descriptor open until the process ends: for when
        /// another connection of this process turned out to have the file open, whose POSIX locks
        /// closing any descriptor of the file would drop.
        package func keepOpen() {
            guard descriptor >= 0 else { return }
            _ = OpenFileLock.set(descriptor, byte: byte, type: F_UNLCK)
            Gate.keptOpen.withLock { $0.append(descriptor) }
            descriptor = -1
        }

        /// Descriptors ``keepOpen()`` kept.
        private static var keptOpen: KeptDescriptors { .shared }
    }

    /// Opens `path` and takes a write lease on it.
    ///
    /// A descriptor another thread's `fork` copied into its child lives until the child's `exec`,
    /// so a refusal is tried again, as ``Gate/lease(attempts:)`` does, before it counts as
    /// ``Outcome/openElsewhere``.
    package static func acquire(_ path: String, attempts: Int = 9) -> Outcome {
        retrying(attempts) { attempt(path) }
    }

    /// Runs `attempt` until it gives something else than ``Outcome/openElsewhere``, at most
    /// `attempts` times: 1 ms after the first, twice as long after each next (about 0.25 s for 9).
    fileprivate static func retrying(_ attempts: Int, _ attempt: () -> Outcome) -> Outcome {
        var outcome = attempt()
        var pause: UInt32 = 1000
        for _ in 1..<max(1, attempts) {
            guard case .openElsewhere = outcome else { break }
            usleep(pause)
            pause *= 2
            outcome = attempt()
        }
        return outcome
    }

    private static func attempt(_ path: String) -> Outcome {
        let descriptor = open(path, O_RDWR | O_CLOEXEC)
        guard descriptor >= 0 else { return .unprovable("cannot open the file: \(String(cString: strerror(errno)))") }
        let outcome = lease(descriptor, gateByte: nil)
        if case .held = outcome { return outcome }
        close(descriptor)
        return outcome
    }

    /// A write lease on `descriptor`, which the caller keeps (and closes) unless it is held.
    fileprivate static func lease(_ descriptor: Int32, gateByte: Int64?) -> Outcome {
        // A lease break signals the holder, by default with SIGIO, whose default action ends the
        // process. SIGURG's default action is to ignore it.
        _ = fcntl(descriptor, setSignal, SIGURG)
        if fcntl(descriptor, setLease, Int32(F_WRLCK)) == 0 {
            return .held(SoleUseLease(descriptor: descriptor, gateByte: gateByte))
        }
        let code = errno
        if code == EAGAIN || code == EBUSY { return .openElsewhere }
        return .unprovable("the kernel refused a lease (\(String(cString: strerror(code))))")
    }

    /// Releases the ``Gate``'s lock this lease was taken with, if any: connections may start
    /// transactions on the file again. The lease and the descriptor stay.
    func openGate() {
        guard descriptor >= 0, let byte = gateByte else { return }
        _ = OpenFileLock.set(descriptor, byte: byte, type: F_UNLCK)
        gateByte = nil
    }

    /// Overwrites the first `bytes` bytes of the leased file with zeros and flushes them: for a
    /// file that was just replaced under its name, so that a process that opened it meanwhile
    /// finds no database in it.
    /// - Throws: ``FileSystemError``.
    package func overwriteStart(bytes: Int) throws(FileSystemError) {
        let zeros = [UInt8](repeating: 0, count: bytes)
        let written = zeros.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, bytes, 0) }
        guard written == bytes else { throw .failed(operation: "overwriting the replaced file's first page", errno: written < 0 ? errno : EIO) }
        guard fdatasync(descriptor) == 0 else { throw .failed(operation: "flushing the replaced file", errno: errno) }
        zeroed = bytes
    }

    /// Takes a POSIX record lock on `length` bytes from `start` of the leased file (a write lock
    /// when `exclusive`, else a read lock), held by this process for as long as the descriptor is
    /// open (also after ``releaseKeepingOpen()``). For a replaced database file: SQLite's locks on
    /// it then tell a process that opened it late that it is in use.
    /// - Throws: ``FileSystemError`` when the lock cannot be taken.
    package func lock(start: Int64, length: Int64, exclusive: Bool) throws(FileSystemError) {
        var lock = flock()
        lock.l_type = Int16(exclusive ? F_WRLCK : F_RDLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = off_t(start)
        lock.l_len = off_t(length)
        guard fcntl(descriptor, F_SETLK, &lock) == 0 else { throw .failed(operation: "locking the replaced file", errno: errno) }
    }

    /// Releases the lease as ``release()`` does but leaves the descriptor open, and returns it to
    /// be closed later: for a file that was just replaced under its name, whose last close frees
    /// its blocks (time in proportion to its size), so that the caller can do that after its pause.
    package func releaseKeepingOpen() -> ReplacedFile {
        guard descriptor >= 0 else { return ReplacedFile(descriptor: -1, zeroed: nil) }
        openGate()
        _ = fcntl(descriptor, Self.setLease, Int32(F_UNLCK))
        defer { descriptor = -1 }
        return ReplacedFile(descriptor: descriptor, zeroed: zeroed)
    }

    /// Releases the lease and closes the descriptor. Safe to call more than once.
    package func release() {
        guard descriptor >= 0 else { return }
        _ = fcntl(descriptor, Self.setLease, Int32(F_UNLCK))
        close(descriptor)
        descriptor = -1
    }

    /// How many descriptors this process has open on the file at `path` (by device and inode,
    /// read from `/proc/self/fd` with `stat` only); `nil` when that cannot be read.
    package static func descriptorsInThisProcess(of path: String) -> Int? {
        var target = stat()
        guard stat(path, &target) == 0, let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return nil }
        var count = 0
        for entry in entries {
            var status = stat()
            if stat("/proc/self/fd/" + entry, &status) == 0, status.st_dev == target.st_dev, status.st_ino == target.st_ino {
                count += 1
            }
        }
        return count
    }
}

/// The last descriptor of a file replaced under its name (``SoleUseLease/releaseKeepingOpen()``):
/// closing it frees the file's blocks. Closed by ``close()``, ``shrinkAndClose()`` or when released.
package final class ReplacedFile {
    private var descriptor: Int32
    /// The bytes at the start that were overwritten with zeros, if they were.
    private let zeroed: Int?

    init(descriptor: Int32, zeroed: Int?) {
        self.descriptor = descriptor
        self.zeroed = zeroed
    }

    deinit { close() }

    /// Frees the file's blocks from its end in steps of `step` bytes, pausing `pause` between
    /// them, down to its zeroed start, and keeps the descriptor (and the locks taken through it)
    /// until ``close()``. Freeing a large file's blocks at once (its last close) makes the file
    /// system's journal commit that holds them slow, and every `fsync` of another file meanwhile
    /// waits for it (measured in Benchmarks/README.md); in steps, each waits for one step at most.
    /// The zeroed start stays, so that a process that opened the file before it was replaced still
    /// finds no database in it (a file cut to nothing would read as a new, empty database).
    /// Without a zeroed start, it only keeps the descriptor.
    package func shrink(step: Int64 = 64 << 20, pause: useconds_t = 5000) {
        if descriptor >= 0, let zeroed, zeroed > 0 {
            var status = stat()
            if fstat(descriptor, &status) == 0 {
                var size = Int64(status.st_size)
                while size > Int64(zeroed) {
                    size = max(Int64(zeroed), size - step)
                    guard ftruncate(descriptor, off_t(size)) == 0 else { break }
                    usleep(pause)
                }
            }
        }
    }

    /// ``shrink(step:pause:)``, then ``close()``.
    package func shrinkAndClose(step: Int64 = 64 << 20, pause: useconds_t = 5000) {
        shrink(step: step, pause: pause)
        close()
    }

    /// Waits until no other descriptor of the replaced file is open, in any process (a write lease
    /// on it is granted, and released at once): a process whose `open` waited on the swap's lease
    /// has it open until it gives up on it, and the locks taken through this descriptor must
    /// outlive that. Polls every 5 ms; `false` after `limit`, or when leases cannot be taken here.
    package func waitForOtherOpeners(limit: Duration) -> Bool {
        guard descriptor >= 0 else { return true }
        let clock = ContinuousClock(), end = clock.now + limit
        while true {
            _ = fcntl(descriptor, SoleUseLease.setSignal, SIGURG)
            if fcntl(descriptor, SoleUseLease.setLease, Int32(F_WRLCK)) == 0 {
                _ = fcntl(descriptor, SoleUseLease.setLease, Int32(F_UNLCK))
                return true
            }
            guard errno == EAGAIN || errno == EBUSY, clock.now < end else { return false }
            usleep(5000)  // paces the poll; the answer comes from the kernel
        }
    }

    /// Keeps the descriptor, and the locks taken through it, open until the process ends: for a
    /// replaced file that another process still has open after ``waitForOtherOpeners(limit:)``.
    package func keepUntilExit() {
        guard descriptor >= 0 else { return }
        KeptDescriptors.shared.withLock { $0.append(descriptor) }
        descriptor = -1
    }

    /// Closes the descriptor. Safe to call more than once.
    package func close() {
        guard descriptor >= 0 else { return }
        closeDescriptor(descriptor)
        descriptor = -1
    }
}

/// `close(2)`, under a name that ``ReplacedFile/close()`` does not shadow.
private func closeDescriptor(_ descriptor: Int32) {
    _ = close(descriptor)
}

/// Descriptors kept open until the process ends (``SoleUseLease/Gate/keepOpen()``,
/// ``ReplacedFile/keepUntilExit()``, ``WALIndexHeader/keepUntilExit()``).
final class KeptDescriptors: @unchecked Sendable {
    static let shared = KeptDescriptors()

    private let lock = NSLock()
    private var descriptors: [Int32] = []

    func withLock(_ body: (inout [Int32]) -> Void) { lock.withLock { body(&descriptors) } }
}
