@testable import EncryptedSQLite
import Foundation
import Testing
import TestSupport

extension RollbackJournal {
    /// A journal with a chosen checksum seed, so that a test can state exact bytes (the type draws
    /// a random seed, as SQLite does). The seed is a stored property; it is set in the value's own
    /// storage.
    init(pageSize: Int, databasePages: UInt32, seed: UInt32) throws {
        self.init(pageSize: pageSize, databasePages: databasePages)
        let offset = try #require(MemoryLayout<RollbackJournal>.offset(of: \RollbackJournal.checksumSeed))
        withUnsafeMutableBytes(of: &self) { $0.storeBytes(of: seed, toByteOffset: offset, as: UInt32.self) }
        #expect(checksumSeed == seed)
    }

    /// The whole journal (header, then one record per page in `pages`) as bytes.
    func bytes(pages: [(number: UInt32, bytes: [UInt8])]) -> [UInt8] {
        var journal = header(recordCount: UInt32(pages.count))
        for page in pages {
            journal += record(page.bytes, number: page.number)
        }
        return journal
    }

    /// One record, made by ``fillRecord(page:number:into:)``.
    func record(_ page: [UInt8], number: UInt32) -> [UInt8] {
        var record = [UInt8](repeating: 0xEE, count: recordSize)
        page.withUnsafeBytes { page in
            record.withUnsafeMutableBytes { fillRecord(page: page, number: number, into: $0) }
        }
        return record
    }

    /// ``checksum(of:)`` of an array.
    func checksum(of page: [UInt8]) -> UInt32 {
        page.withUnsafeBytes { checksum(of: $0) }
    }
}

/// `value` as 4 big-endian bytes, spelled out byte by byte.
private func bigEndian(_ value: UInt32) -> [UInt8] {
    [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
}

/// Who opens the database with the hot journal beside it.
enum JournalReader: String, Sendable, CaseIterable, CustomTestStringConvertible {
    /// Debian's plain `sqlite3` shell (its own SQLite, independent of this library).
    case sqlite3Shell = "the sqlite3 shell"
    /// The library's `Connection`, unkeyed (the SQLite inside libsqlcipher).
    case connection = "an unkeyed Connection"
    var testDescription: String { rawValue }
}

/// A damage to a journal that RollbackJournal wrote, for the controls that prove the behavioural
/// test notices a wrong format.
enum JournalDamage: String, Sendable, CaseIterable, CustomTestStringConvertible {
    case magic = "first byte of the magic"
    case headerByteOrder = "header fields little-endian"
    case pageNumberByteOrder = "page numbers little-endian"
    case checksum = "checksum of the first record"
    var testDescription: String { rawValue }

    func apply(to journal: inout [UInt8], _ format: RollbackJournal, records: Int) {
        switch self {
        case .magic:
            journal[0] ^= 0x01
        case .headerByteOrder:
            for field in 0..<5 { journal[(8 + 4 * field)..<(12 + 4 * field)].reverse() }
        case .pageNumberByteOrder:
            for index in 0..<records {
                let start = Int(format.recordOffset(index))
                journal[start..<(start + 4)].reverse()
            }
        case .checksum:
            journal[Int(format.recordOffset(1)) - 1] ^= 0x01
        }
    }
}

@Suite("Rollback journal: SQLite's byte format")
struct RollbackJournalTests {
    static let pageSizes = [512, 1024, 4096, 65536]

    // MARK: - Bytes

    @Test("the header: magic, record count, seed, database pages, sector 512, page size, big-endian, zero-padded to 512 bytes",
          arguments: RollbackJournalTests.pageSizes)
    func header(pageSize: Int) throws {
        let journal = try RollbackJournal(pageSize: pageSize, databasePages: 0x1122_3344, seed: 0xA1B2_C3D4)
        let header = journal.header(recordCount: 0x0A0B_0C0D)
        #expect(RollbackJournal.headerSize == 512)
        #expect(header.count == 512)
        #expect(Array(header[0..<8]) == [0xD9, 0xD5, 0x05, 0xF9, 0x20, 0xA1, 0x63, 0xD7])
        #expect(Array(header[8..<12]) == [0x0A, 0x0B, 0x0C, 0x0D])
        #expect(Array(header[12..<16]) == [0xA1, 0xB2, 0xC3, 0xD4])
        #expect(Array(header[16..<20]) == [0x11, 0x22, 0x33, 0x44])
        #expect(Array(header[20..<24]) == [0x00, 0x00, 0x02, 0x00])
        #expect(Array(header[24..<28]) == bigEndian(UInt32(pageSize)))
        #expect(header[28...].allSatisfy { $0 == 0 })
    }

    @Test("the header of a journal with no records, and of one with as many records as a UInt32 holds")
    func headerExtremes() throws {
        let journal = try RollbackJournal(pageSize: 4096, databasePages: 1, seed: 0)
        #expect(Array(journal.header(recordCount: 0)[8..<20]) == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])
        #expect(Array(journal.header(recordCount: .max)[8..<12]) == [0xFF, 0xFF, 0xFF, 0xFF])
        #expect(Array(journal.header(recordCount: 1)[24..<28]) == [0x00, 0x00, 0x10, 0x00])
    }

    @Test("records follow the 512-byte header back to back: recordSize, recordOffset, size", arguments: RollbackJournalTests.pageSizes)
    func offsets(pageSize: Int) throws {
        let journal = try RollbackJournal(pageSize: pageSize, databasePages: 3, seed: 7)
        #expect(journal.recordSize == 4 + pageSize + 4)
        #expect(journal.recordOffset(0) == 512)
        #expect(journal.recordOffset(1) == Int64(512 + pageSize + 8))
        #expect(journal.recordOffset(3) == Int64(512 + 3 * (pageSize + 8)))
        #expect(journal.size(recordCount: 0) == 512)
        #expect(journal.size(recordCount: 3) == Int64(512 + 3 * (pageSize + 8)))
        // The largest journal the rotation may plan (every page of a file of UInt32.max - 1 pages)
        // is counted in 64 bits, without overflow.
        let largest = Int64(UInt32.max - 1)
        #expect(journal.size(recordCount: Int(largest)) == 512 + largest * Int64(pageSize + 8))
        // A whole journal has exactly that size.
        let pages = (1...3).map { (number: UInt32($0), bytes: [UInt8](repeating: UInt8($0), count: pageSize)) }
        #expect(Int64(journal.bytes(pages: pages).count) == journal.size(recordCount: 3))
    }

    @Test("a record: page number big-endian, the page's bytes unchanged, the checksum big-endian, nothing else",
          arguments: RollbackJournalTests.pageSizes)
    func record(pageSize: Int) throws {
        let journal = try RollbackJournal(pageSize: pageSize, databasePages: 9, seed: 0x0102_0304)
        let page = (0..<pageSize).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        let record = journal.record(page, number: 0x0005_0607)
        #expect(record.count == pageSize + 8)
        #expect(Array(record[0..<4]) == [0x00, 0x05, 0x06, 0x07])
        #expect(Array(record[4..<(4 + pageSize)]) == page)
        let expected = stride(from: pageSize - 200, to: 0, by: -200).reduce(UInt32(0x0102_0304)) { $0 &+ UInt32(page[$1]) }
        #expect(Array(record[(4 + pageSize)...]) == bigEndian(expected))
        #expect(journal.checksum(of: page) == expected)
    }

    @Test("the checksum, worked by hand: seed + the bytes at 312 and 112 of a 512-byte page, at 824…24 of a 1024-byte page")
    func checksumByHand() throws {
        var small = [UInt8](repeating: 0xEE, count: 512)
        small[312] = 1
        small[112] = 2
        #expect(try RollbackJournal(pageSize: 512, databasePages: 1, seed: 0x10).checksum(of: small) == 0x13)

        var page = [UInt8](repeating: 0xEE, count: 1024)
        for (offset, value) in zip([824, 624, 424, 224, 24], 1...5) { page[offset] = UInt8(value) }
        let journal = try RollbackJournal(pageSize: 1024, databasePages: 1, seed: 1000)
        #expect(journal.checksum(of: page) == 1015)
        #expect(Array(journal.record(page, number: 1)[1028...]) == [0x00, 0x00, 0x03, 0xF7])
    }

    @Test("the checksum wraps around modulo 2^32, as SQLite's u32 sum does")
    func checksumWraps() throws {
        let journal = try RollbackJournal(pageSize: 1024, databasePages: 1, seed: .max - 1)
        let page = [UInt8](repeating: 0xFF, count: 1024)
        // (2^32 - 2) + 5 * 255 = 2^32 + 1273
        #expect(journal.checksum(of: page) == 1273)
        #expect(Array(journal.record(page, number: 1)[1028...]) == [0x00, 0x00, 0x04, 0xF9])

        let largest = try RollbackJournal(pageSize: 65536, databasePages: 1, seed: .max)
        // 327 sampled bytes of 0xFF: 327 * 255 - 1.
        #expect(largest.checksum(of: [UInt8](repeating: 0xFF, count: 65536)) == 83384)
        #expect(largest.checksum(of: [UInt8](repeating: 0, count: 65536)) == .max)
    }

    @Test("the checksum reads exactly the bytes at pageSize - 200k (k ≥ 1) and no other byte",
          arguments: [(512, 2), (1024, 5), (4096, 20), (65536, 327)])
    func checksumSamples(pageSize: Int, samples: Int) throws {
        let journal = try RollbackJournal(pageSize: pageSize, databasePages: 1, seed: 0x5555_0000)
        #expect(journal.checksum(of: [UInt8](repeating: 1, count: pageSize)) == 0x5555_0000 + UInt32(samples))
        guard pageSize <= 4096 else { return }
        var page = [UInt8](repeating: 0, count: pageSize)
        for offset in 0..<pageSize {
            page[offset] = 0x80
            let sampled = offset > 0 && (pageSize - offset) % 200 == 0
            #expect(journal.checksum(of: page) == 0x5555_0000 + (sampled ? 0x80 : 0), "offset \(offset)")
            page[offset] = 0
        }
    }

    @Test("each journal draws its own checksum seed")
    func randomSeed() {
        let seeds = Set((0..<8).map { _ in RollbackJournal(pageSize: 4096, databasePages: 1).checksumSeed })
        #expect(seeds.count > 1)
    }

    // MARK: - SQLite reads it

    @Test("SQLite rolls a database back from the journal: every page as it was, the file's size as it was, journal gone",
          arguments: RollbackJournalTests.pageSizes, JournalReader.allCases)
    func sqliteRollsBack(pageSize: Int, reader: JournalReader) throws {
        let scene = try HotJournalScene(pageSize: pageSize)
        // A seed near the top, so that most records' checksums wrap around.
        try scene.writeJournal(seed: .max - 300)
        try scene.scribble()

        let contents = try scene.open(with: reader)
        #expect(contents.integrity == "ok")
        #expect(contents.rows == "300|42|1234567")
        #expect(TestFiles.contents(scene.path) == scene.original, "the database is not byte-identical to the original")
        #expect(!FileManager.default.fileExists(atPath: scene.path + "-journal"))
    }

    @Test("control: a journal with a wrong byte is not rolled back, so the test above would notice a wrong format",
          arguments: JournalDamage.allCases)
    func damagedJournalIsNotRolledBack(damage: JournalDamage) throws {
        let scene = try HotJournalScene(pageSize: 1024)
        try scene.writeJournal(seed: .random(in: 0...UInt32.max), damage: damage)
        try scene.scribble()
        let contents = try? scene.open(with: .sqlite3Shell)
        #expect(contents?.integrity != "ok" || contents?.rows != "300|42|1234567")
        #expect(TestFiles.contents(scene.path) != scene.original)
    }
}

/// A plaintext database made by the `sqlite3` shell, with a hot journal written by
/// ``RollbackJournal`` holding its original pages, and its pages overwritten afterwards: what a
/// page re-encryption interrupted mid-write leaves on disk (without the encryption, which the
/// format does not see).
struct HotJournalScene {
    let directory = TemporaryDirectory("journal")
    let path: String
    let pageSize: Int
    let original: Data

    init(pageSize: Int) throws {
        self.pageSize = pageSize
        path = directory.file("plain.sqlite")
        let made = try SQLiteShell.run(path, "PRAGMA page_size = \(pageSize);\n" + Fixture.sql(rows: 300))
        try #require(made.status == 0, "\(made.stderr)")
        original = try #require(TestFiles.contents(path))
        try #require(original.count % pageSize == 0 && original.count >= 3 * pageSize)
        try #require(SQLiteShell.run(path, "PRAGMA page_size;").stdout == "\(pageSize)\n")
    }

    var pageCount: Int { original.count / pageSize }

    /// Writes `<database>-journal`: every original page, in descending order (SQLite does not
    /// need them in order), optionally damaged afterwards.
    func writeJournal(seed: UInt32, damage: JournalDamage? = nil) throws {
        let journal = try RollbackJournal(pageSize: pageSize, databasePages: UInt32(pageCount), seed: seed)
        let pages = (1...pageCount).reversed().map { number in
            (number: UInt32(number), bytes: [UInt8](original[((number - 1) * pageSize)..<(number * pageSize)]))
        }
        var bytes = journal.bytes(pages: pages)
        damage?.apply(to: &bytes, journal, records: pages.count)
        try Data(bytes).write(to: URL(fileURLWithPath: path + "-journal"))
    }

    /// Overwrites every page (page 1 included) with other bytes and appends three pages, as an
    /// interrupted rewrite would leave the file.
    func scribble() throws {
        var scribbled = Data(count: original.count + 3 * pageSize)
        for index in scribbled.indices { scribbled[index] = UInt8(truncatingIfNeeded: index &* 31 &+ 5) ^ 0x5A }
        try scribbled.write(to: URL(fileURLWithPath: path))
        try #require(TestFiles.contents(path) != original)
    }

    /// What a reader sees when it opens the file: `PRAGMA integrity_check`, and the row count,
    /// `user_version` and `application_id` joined with `|`.
    func open(with reader: JournalReader) throws -> (integrity: String, rows: String) {
        switch reader {
        case .sqlite3Shell:
            let result = try SQLiteShell.run(path, "PRAGMA integrity_check;\nSELECT count(*) FROM people;\nPRAGMA user_version;\nPRAGMA application_id;")
            let lines = result.stdout.split(separator: "\n").map(String.init)
            guard result.status == 0, lines.count == 4 else { throw ReadFailed(detail: result.stdout + result.stderr) }
            return (lines[0], lines[1...].joined(separator: "|"))
        case .connection:
            let connection = try Connection(path: path, access: .readWrite, key: nil, busyTimeout: .seconds(2))
            defer { connection.close() }
            let integrity = try connection.queryValue("PRAGMA integrity_check", as: String.self) ?? ""
            let values = try ["SELECT count(*) FROM people", "PRAGMA user_version", "PRAGMA application_id"].map { sql in
                try connection.queryValue(sql, as: Int.self).map(String.init) ?? "NULL"
            }
            return (integrity, values.joined(separator: "|"))
        }
    }

    struct ReadFailed: Error {
        let detail: String
    }
}
