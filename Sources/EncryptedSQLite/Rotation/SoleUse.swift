import DurableFiles
import Logging

/// The step every rotation takes before it renames a new file over the database (the export
/// path, the background swap): proof that no connection in any process has the file open, so
/// that nobody goes on reading or writing the file being replaced.
///
/// It locks SQLite's PENDING byte through a descriptor of its own (``SoleUseLease/Gate``) while
/// this process's connections still hold the database's lock, closes them, and takes a Linux
/// write lease through that descriptor. In between, no connection anywhere can start a
/// transaction, so no process can open the file, commit and close again unseen by the lease.
/// The Architecture article's rotation protocol says who holds which lock at each step.
enum SoleUse {
    /// SQLite's lock bytes in a database file (os_unix.c: `PENDING_BYTE` 0x40000000, the RESERVED
    /// byte after it, then the 510-byte SHARED range).
    static let pendingByte: Int64 = 0x4000_0000
    static let reservedByte: Int64 = 0x4000_0001
    static let sharedFirst: Int64 = 0x4000_0002
    static let sharedSize: Int64 = 510

    /// What ``prove(_:closing:)`` found.
    enum Outcome {
        /// Nobody else has the file open; the lease holds off late openers until it is released.
        case held(SoleUseLease)
        /// Another connection, in this process or another, has the file open or is starting a
        /// transaction on it: the file must not be replaced now.
        case inUse(String)
        /// The lease cannot be taken here (a file system without leases, a file this user does
        /// not own), so whether others have the file open cannot be proven.
        case unprovable(String)
    }

    /// Calls `close` (which must close every connection of this process to the file at `path`)
    /// and proves that no connection in any process has the file open.
    static func prove(_ path: String, closing close: () -> Void) -> Outcome {
        let gate = SoleUseLease.Gate(path, byte: pendingByte)
        close()
        if let own = SoleUseLease.descriptorsInThisProcess(of: path), own > 1 {
            gate.keepOpen()  // closing it would drop the other connection's locks
            return .inUse("this process has the file open through another connection")
        }
        defer { gate.close() }
        if let refusal = gate.refusal {
            return refusal.hasPrefix("another") ? .inUse(refusal) : .unprovable(refusal)
        }
        switch gate.lease() {
        case .held(let lease): return .held(lease)
        case .openElsewhere: return .inUse("another process has the file open")
        case .unprovable(let why): return .unprovable(why)
        }
    }

    /// The step every rotation takes right after it renamed a new file over the database, before
    /// it lets the lease go: it makes the replaced file safe for a process whose `open` waited on
    /// the lease. Such a process gets the replaced file, while its SQLite finds the side files by
    /// name, so they are the new file's:
    /// - its first page is zeroed: the process finds no database there (``SoleUseLease/overwriteStart(bytes:)``);
    /// - a SHARED and a RESERVED lock are held on it, as a connection inside a write transaction
    ///   would hold them: the process cannot take the new file's live `-journal` for a hot one and
    ///   roll it into the replaced file (deleting it), nor close as the last connection in WAL mode
    ///   and checkpoint the new file's `-wal` into the replaced file and delete it.
    ///
    /// Returns the replaced file's descriptor, which holds those locks until it is closed: keep it
    /// while any other process has the replaced file open (``ReplacedFile/waitForOtherOpeners(limit:)``).
    static func fenceReplaced(_ lease: SoleUseLease, pageSize: Int, path: String, logger: Logger) -> ReplacedFile {
        do {
            try lease.overwriteStart(bytes: pageSize)
        } catch {
            logger.warning("could not overwrite the replaced file's first page", metadata: ["path": "\(path)", "error": "\(error)"])
        }
        do {
            try lease.lock(start: sharedFirst, length: sharedSize, exclusive: false)
            try lease.lock(start: reservedByte, length: 1, exclusive: true)
        } catch {
            logger.warning("could not lock the replaced file", metadata: ["path": "\(path)", "error": "\(error)"])
        }
        return lease.releaseKeepingOpen()
    }
}
