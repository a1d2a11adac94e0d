import CipherFormats
import DurableFiles
import Foundation
import SQLCipherConnection

/// Phase B of a page re-encryption: the rollback journal, made durable before the database is touched.
extension PageReencryption {
    /// Writes every page as stored into a new journal and makes it durable under a temporary
    /// name, then links it to `<database>-journal` (never replacing a file there) and syncs the
    /// folder: the journal appears under its name only complete and durable, so a power cut while
    /// it is written cannot leave a half-written journal beside the database (SQLite's own
    /// protocol can: a journal whose first block was lost is ignored by SQLite and stays forever).
    ///
    /// Every page is authenticated with the old key as it is read (the workers would otherwise
    /// wait for the disk): a damaged file stops the rotation here, before the database is
    /// written, and the rewrite need not check the old HMACs again (the EXCLUSIVE lock, held
    /// since phase A, keeps the pages as read).
    /// - Throws: ``EncryptedDatabaseError/rotationNotApplied(path:fromKeyID:toKeyID:detail:)``
    ///   for a page that does not authenticate; I/O errors as ``EncryptedDatabaseError``.
    func writeJournal(at journalPath: String, prepared: Prepared, in context: RotationContext) throws(EncryptedDatabaseError) -> any RandomAccessFile {
        let temporary = RotationTemporaries.newPath(for: context.path, suffix: RotationTemporaries.journalSuffix)
        let journal = WriteBehindFile(try context.step("creating the journal \(temporary)") { () throws(FileSystemError) -> any RandomAccessFile in
            try context.files.createFile(temporary, prepared.mode, context.path)
        }, interval: writeBehindBytes)
        let layout = prepared.journal
        let records = Int(prepared.pageCount) - (prepared.pageCount >= prepared.format.lockBytePage ? 1 : 0)
        var linked = false
        do {
            try layout.header(recordCount: UInt32(records)).withUnsafeBytes { header in try journal.write(header, at: 0) }
            let database = prepared.database
            let format = prepared.format
            let oldKeys = prepared.oldKeys
            try chunks(prepared).forEach(workers: context.workers, makeState: {
                guard let cipher = PageCipher(keys: oldKeys, format: format) else { throw PageReencoder.Failure.openSSL("could not set up the page cipher") }
                return (pages: PageBuffer(count: chunkPages(format) * format.pageSize), records: PageBuffer(count: chunkPages(format) * layout.recordSize),
                        cipher: cipher)
            }, work: { state, first, count in
                let pages = state.pages.prefix(count * format.pageSize)
                guard try database.read(into: pages, at: Int64(first - 1) * Int64(format.pageSize)) == pages.count else {
                    throw FileSystemError.failed(operation: "read \(context.path): the file is shorter than its page count", errno: EIO)
                }
                if let damaged = state.cipher.firstUnauthenticatedPage(in: UnsafeRawBufferPointer(pages), first: first) {
                    throw PageReencoder.Failure.notAuthenticated(page: damaged)
                }
                var written = 0
                var firstRecord: Int?
                for index in 0..<count {
                    let number = first + UInt32(index)
                    guard number != format.lockBytePage else { continue }
                    firstRecord = firstRecord ?? Self.recordIndex(of: number, format: format)
                    let page = UnsafeRawBufferPointer(rebasing: pages[(index * format.pageSize)..<((index + 1) * format.pageSize)])
                    let record = UnsafeMutableRawBufferPointer(rebasing: state.records.bytes[(written * layout.recordSize)..<((written + 1) * layout.recordSize)])
                    layout.fillRecord(page: page, number: number, into: record)
                    written += 1
                }
                if let firstRecord {
                    try journal.write(UnsafeRawBufferPointer(state.records.prefix(written * layout.recordSize)), at: layout.recordOffset(firstRecord))
                }
            })
            try journal.synchronize()
            do {
                try context.files.publish(temporary, as: journalPath, replacing: false, synchronize: false)
            } catch {
                if case .folderNotSynced = error { linked = true }
                throw error
            }
        } catch {
            // The database is untouched: our journal, complete or not, can go (a journal that was
            // already there when we tried to link ours is not ours).
            journal.close()
            if linked { context.files.removeIfPresent(journalPath) }
            context.files.removeIfPresent(temporary)
            if let failure = error as? PageReencoder.Failure {
                throw .rotationNotApplied(path: context.path, fromKeyID: context.from.id, toKeyID: context.to.id,
                                          detail: "\(failure); the database was not written")
            }
            throw EncryptedDatabaseError.from(error, path: context.path, operation: "writing the rotation's journal")
        }
        return journal
    }

    /// The journal record that holds page `number` (the lock-byte page has none).
    static func recordIndex(of number: UInt32, format: PageFormat) -> Int {
        Int(number) - 1 - (number > format.lockBytePage ? 1 : 0)
    }
}
