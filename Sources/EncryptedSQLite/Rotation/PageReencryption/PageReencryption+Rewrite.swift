import CipherFormats
import COpenSSLCrypto
import DurableFiles
import Foundation
import SQLCipherConnection

/// Phase C of a page re-encryption: every page rewritten for the new key, then read back and
/// authenticated.
extension PageReencryption {
    /// Decrypts every page with the old key and encrypts it with the new one (fresh IVs, the same
    /// salt in page 1), writing each chunk back in place; then syncs the file.
    ///
    /// With `walMode`, the new page 1 also says WAL mode (``walFileFormat(inPage1:)``), so that
    /// the commit puts the file back in the WAL mode the rotation took it out of: no SQLite
    /// transaction runs after the commit to do it.
    /// - Throws: ``EncryptedDatabaseError`` for I/O failures, `PageReencoder.Failure` for a page
    ///   that does not authenticate or OpenSSL failing.
    func rewritePages(_ prepared: Prepared, walMode: Bool, in context: RotationContext) throws {
        let format = prepared.format
        let database = prepared.database
        let (oldKeys, newKeys) = (prepared.oldKeys, prepared.newKeys)
        do {
            try chunks(prepared).forEach(workers: context.workers, makeState: { () throws -> (PageReencoder, PageBuffer) in
                let pages = chunkPages(format)
                return (try PageReencoder(from: oldKeys, to: newKeys, format: format, maximumPages: pages), PageBuffer(count: pages * format.pageSize))
            }, work: { state, first, count in
                let size = format.pageSize
                let stored = state.1.prefix(count * size)
                let offset = Int64(first - 1) * Int64(size)
                guard try database.read(into: stored, at: offset) == stored.count else {
                    throw FileSystemError.failed(operation: "read \(context.path): the file is shorter than its page count", errno: EIO)
                }
                try state.0.reencrypt(stored, first: first, editPage1: { if walMode { Self.walFileFormat(inPage1: $0) } })
                try database.write(UnsafeRawBufferPointer(stored), at: offset)
            })
            try database.synchronize()
        } catch let error as FileSystemError {
            throw EncryptedDatabaseError.from(error, path: context.path, operation: "rewriting pages for the new key")
        }
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

    /// Reads every page back from the file and checks its HMAC with the new key.
    /// - Throws: ``EncryptedDatabaseError`` for I/O failures, ``PageFailure`` for a page that does
    ///   not authenticate.
    func authenticatePages(_ prepared: Prepared, in context: RotationContext) throws {
        do {
            try PageAuthentication(file: prepared.database, format: prepared.format, keys: prepared.newKeys, pageCount: prepared.pageCount,
                                   chunkPages: chunkPages(prepared.format), workers: context.workers).run()
        } catch let error as FileSystemError {
            throw EncryptedDatabaseError.from(error, path: context.path, operation: "reading pages back for verification")
        }
    }

    /// Releases the lock with the journal hot, lets SQLite roll the file back on a fresh
}

/// A page-level failure (authentication, OpenSSL) with a description that holds no key material.
struct PageFailure: Error {
    let detail: String
}

/// Reads every page of a file and checks its HMAC with one set of keys, on several threads.
struct PageAuthentication {
    let file: any RandomAccessFile
    let format: PageFormat
    let keys: PageKeys
    let pageCount: UInt32
    let chunkPages: Int
    let workers: Int

    /// Throws ``PageFailure`` naming the first page that does not authenticate, or the read error.
    func run() throws {
        let (file, format, keys) = (file, format, keys)
        try PageChunks(pageCount: pageCount, chunkPages: chunkPages).forEach(workers: workers, makeState: { () throws -> (PageCipher, PageBuffer) in
            guard let cipher = PageCipher(keys: keys, format: format) else { throw PageFailure(detail: "OpenSSL could not set up the page cipher") }
            return (cipher, PageBuffer(count: chunkPages * format.pageSize))
        }, work: { state, first, count in
            let size = format.pageSize
            let stored = state.1.prefix(count * size)
            guard try file.read(into: stored, at: Int64(first - 1) * Int64(size)) == stored.count else {
                throw FileSystemError.failed(operation: "read \(file.path): the file is shorter than its page count", errno: EIO)
            }
            for index in 0..<count {
                let number = first + UInt32(index)
                guard number != format.lockBytePage else { continue }
                let page = UnsafeRawBufferPointer(rebasing: stored[(index * size)..<((index + 1) * size)])
                guard state.0.authenticates(page, number: number) else {
                    throw PageFailure(detail: "page \(number) of \(file.path) does not authenticate with the new key")
                }
            }
        })
    }
}
