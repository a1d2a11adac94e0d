import Foundation

/// A rollback journal in SQLite's own format (`<database>-journal`), holding the original bytes
/// of every page that a page re-encryption rewrites.
///
/// Because the format is SQLite's, every SQLite that opens the database after an interruption —
/// this library, the `sqlcipher` shell, another process, with any key or none — finds a *hot*
/// journal and copies the original pages back before reading anything, exactly as it does after a
/// crash in one of its own transactions. The journal holds the pages as stored (encrypted), so no
/// plaintext touches the disk and rolling back needs no key.
///
/// Layout (SQLite 3 `pager.c`): a header padded to ``headerSize`` bytes — magic, record count,
/// checksum seed, database size in pages, sector size, page size (big-endian 32-bit integers) —
/// then one record per page: page number, the page's bytes, a checksum (the seed plus every 200th
/// byte of the page, from the end).
///
/// Protocol (``PageReencryption``): the whole journal is written and synced under a temporary
/// name, then linked to `<database>-journal` and the folder synced. Only then may the database be
/// written. So the journal exists under its name only when complete and durable.
struct RollbackJournal {
    static let magic: [UInt8] = [0xD9, 0xD5, 0x05, 0xF9, 0x20, 0xA1, 0x63, 0xD7]
    /// The header's size and the sector size it declares.
    static let headerSize = 512

    let pageSize: Int
    /// The database's size in pages before the rewrite (SQLite truncates to it when rolling back).
    let databasePages: UInt32
    /// The random seed of the record checksums.
    let checksumSeed: UInt32

    init(pageSize: Int, databasePages: UInt32) {
        self.pageSize = pageSize
        self.databasePages = databasePages
        checksumSeed = UInt32.random(in: 0...UInt32.max)
    }

    /// The size of one record: page number, page, checksum.
    var recordSize: Int { pageSize + 8 }

    /// The header for `recordCount` records.
    func header(recordCount: UInt32) -> [UInt8] {
        var bytes = Self.magic
        for value in [recordCount, checksumSeed, databasePages, UInt32(Self.headerSize), UInt32(pageSize)] {
            bytes += withUnsafeBytes(of: value.bigEndian) { Array($0) }
        }
        return bytes + [UInt8](repeating: 0, count: Self.headerSize - bytes.count)
    }

    /// Where record `index` (0-based) starts.
    func recordOffset(_ index: Int) -> Int64 { Int64(Self.headerSize) + Int64(index) * Int64(recordSize) }

    /// The journal's size for `recordCount` records.
    func size(recordCount: Int) -> Int64 { recordOffset(recordCount) }

    /// Writes the record for page `number` with the stored bytes `page` into `record` (``recordSize`` bytes).
    func fillRecord(page: UnsafeRawBufferPointer, number: UInt32, into record: UnsafeMutableRawBufferPointer) {
        record.storeBytes(of: number.bigEndian, toByteOffset: 0, as: UInt32.self)
        UnsafeMutableRawBufferPointer(rebasing: record[4..<(4 + pageSize)]).copyMemory(from: page)
        record.storeBytes(of: checksum(of: page).bigEndian, toByteOffset: 4 + pageSize, as: UInt32.self)
    }

    /// SQLite's record checksum: the seed plus the bytes at offsets pageSize-200, pageSize-400, … > 0.
    func checksum(of page: UnsafeRawBufferPointer) -> UInt32 {
        var sum = checksumSeed
        var offset = pageSize - 200
        while offset > 0 {
            sum &+= UInt32(page[offset])
            offset -= 200
        }
        return sum
    }
}
