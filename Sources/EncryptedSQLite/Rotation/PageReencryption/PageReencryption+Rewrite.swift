import CipherFormats
import COpenSSLCrypto
import DurableFiles
import Foundation
import SQLCipherConnection

/// Phase C of a page re-encryption: every page rewritten for the new key, then read back and
/// compared.
extension PageReencryption {
    /// Decrypts every page with the old key and encrypts it with the new one (fresh IVs, the same
    /// salt in page 1), writing each chunk back in place; with `readBack`, reads each chunk back
    /// from the file right after writing it and compares it byte for byte with the pages as
    /// encrypted and signed with the new key; then syncs the file. Returns the time the workers
    /// spent reading back and comparing, divided by their number.
    ///
    /// With `walMode`, the new page 1 also says WAL mode (``walFileFormat(inPage1:)``), so that
    /// the commit puts the file back in the WAL mode the rotation took it out of: no SQLite
    /// transaction runs after the commit to do it.
    /// The old HMACs are not checked again: ``writeJournal(at:prepared:in:)`` authenticated every
    /// page as it read it, under the lock held since.
    /// - Throws: ``EncryptedDatabaseError`` for I/O failures, `PageReencoder.Failure` for OpenSSL
    ///   failing, ``PageFailure`` for a page that does not read back as written.
    func rewritePages(_ prepared: Prepared, walMode: Bool, readBack: Bool, in context: RotationContext) throws -> Duration {
        let format = prepared.format
        let database = prepared.database
        let (oldKeys, newKeys) = (prepared.oldKeys, prepared.newKeys)
        let readingBack = Locked(Duration.zero)
        let workers = min(context.workers, chunks(prepared).chunkCount)
        do {
            try chunks(prepared).forEach(workers: context.workers, makeState: { () throws -> RewriteState in
                let pages = chunkPages(format)
                return RewriteState(reencoder: try PageReencoder(from: oldKeys, to: newKeys, format: format, maximumPages: pages),
                                    stored: PageBuffer(count: pages * format.pageSize),
                                    readBack: readBack ? PageBuffer(count: pages * format.pageSize) : nil)
            }, work: { state, first, count in
                let size = format.pageSize
                let stored = state.stored.prefix(count * size)
                let offset = Int64(first - 1) * Int64(size)
                guard try database.read(into: stored, at: offset) == stored.count else {
                    throw FileSystemError.failed(operation: "read \(context.path): the file is shorter than its page count", errno: EIO)
                }
                // writeJournal authenticated these very pages under the lock held since.
                try state.reencoder.reencrypt(stored, first: first, authenticating: false,
                                              editPage1: { if walMode { Self.walFileFormat(inPage1: $0) } })
                try database.write(UnsafeRawBufferPointer(stored), at: offset)
                guard let buffer = state.readBack else { return }
                let time = Stopwatch()
                let readBack = buffer.prefix(count * size)
                guard try database.read(into: readBack, at: offset) == readBack.count else {
                    throw FileSystemError.failed(operation: "read \(context.path): the file is shorter than its page count", errno: EIO)
                }
                if let page = Self.firstDifferingPage(UnsafeRawBufferPointer(readBack), UnsafeRawBufferPointer(stored), pageSize: size) {
                    throw PageFailure(detail: "page \(first + page) of \(database.path) does not read back as it was written for the new key")
                }
                let elapsed = time.elapsed
                readingBack.withLock { $0 += elapsed }
            })
            try database.synchronize()
        } catch let error as FileSystemError {
            throw EncryptedDatabaseError.from(error, path: context.path, operation: "rewriting pages for the new key")
        }
        return readingBack.withLock { $0 } / max(1, workers)
    }

    /// One worker's ciphers and buffers for ``rewritePages(_:walMode:readBack:in:)``.
    private struct RewriteState {
        let reencoder: PageReencoder
        let stored: PageBuffer
        let readBack: PageBuffer?
    }

    /// The index of the first page that differs between `read` and `written` (whole pages of
    /// `pageSize` bytes), or `nil` when they are equal.
    static func firstDifferingPage(_ read: UnsafeRawBufferPointer, _ written: UnsafeRawBufferPointer, pageSize: Int) -> UInt32? {
        guard memcmp(read.baseAddress!, written.baseAddress!, read.count) != 0 else { return nil }
        let page = (0..<(read.count / pageSize)).first { memcmp(read.baseAddress! + $0 * pageSize, written.baseAddress! + $0 * pageSize, pageSize) != 0 }
        return page.map(UInt32.init)
    }

    /// Sets the file format write and read versions of SQLite's file header (bytes 18 and 19 of
    /// the plaintext page 1) to 2, WAL mode: the two bytes `PRAGMA journal_mode = WAL` writes
    /// (`sqlite3BtreeSetVersion`), and all it changes in the file.
    ///
    /// Written by SQLite after the commit, that switch is a transaction of its own through a
    /// rollback journal whose header stays zeroed until the journal is synced: a process killed
    /// inside it leaves the file in rollback-journal mode beside a `-journal` that SQLite ignores
    /// (not hot) and removes only at its next write, which opening the file, already on the new
    /// key, never makes. Written here, in the new page 1, it commits with the rotation.
    static func walFileFormat(inPage1 plaintext: UnsafeMutableRawBufferPointer) {
        plaintext[18] = 2
        plaintext[19] = 2
    }

    /// Releases the lock with the journal hot, lets SQLite roll the file back on a fresh
}

/// A page-level failure (authentication, OpenSSL) with a description that holds no key material.
struct PageFailure: Error {
    let detail: String
}
