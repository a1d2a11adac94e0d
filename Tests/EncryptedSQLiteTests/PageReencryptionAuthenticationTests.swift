import DurableFiles
@testable import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// Where in the file the bad write lands (always a page after page 1).
enum BadPage: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case second, middle, last

    var testDescription: String { "page \(rawValue == "second" ? "2" : rawValue)" }

    func number(pageCount: Int) -> Int {
        switch self {
        case .second: 2
        case .middle: pageCount / 2
        case .last: pageCount
        }
    }
}

@Suite("Page re-encryption: every page is read back and compared before the commit", .ownThread)
struct PageReencryptionAuthenticationTests {
    @Test("a page after page 1 written wrong (one byte) is caught before the commit: the rotation is refused, the file is byte-identical, and the sqlcipher shell opens it with the old key and not the new",
          arguments: BadPage.allCases)
    func badWriteOfLaterPage(_ bad: BadPage) throws {
        let directory = TemporaryDirectory("bad-page-write")
        let ring = TestKeyring([.passphrase, .hex], in: directory)
        let path = directory.file("app.sqlite")
        // About 1.3 MB in the shell's default format (1 KiB pages on SQLCipher 3, 4 KiB on
        // SQLCipher 4): several of the rotation's 256 KiB chunks.
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 1500)
        let blobs = try SQLCipherShell.run(path, key: ring.keys[0].shellKey, "CREATE TABLE blobs(id INTEGER PRIMARY KEY, b BLOB); WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 300) INSERT INTO blobs(b) SELECT randomblob(3000) FROM n;\nPRAGMA cipher_page_size;")
        #expect(blobs.status == 0, "\(blobs.stderr)")
        let pageSize = try #require(Int(blobs.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(pageSize == (SQLCipherEngine.linked.major >= 4 ? 4096 : 1024))
        let pageCount = Int(FileSystem.size(of: path) ?? 0) / pageSize
        #expect(pageCount * pageSize > 4 * 256 * 1024)
        let page = bad.number(pageCount: pageCount)
        let original = FileSnapshot(path)

        let corrupted = EventCounter()
        var options = OpenOptions()
        options.files.observe = { CorruptingFile($0, byteAt: Int64((page - 1) * pageSize + 100), counter: corrupted) }
        #expect {
            _ = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: options)
        } throws: { error in
            guard case .rotationNotApplied(path, "k1", "k2", let detail) = error as? EncryptedDatabaseError else { return false }
            return detail.contains("page \(page) of") && detail.contains("does not read back as it was written for the new key") && detail.contains("rolled back")
        }
        #expect(corrupted.count == 1, "the rotation should have written page \(page) once, through the seam")
        // The very same bytes, and no journal, undo file or temporary beside it.
        #expect(FileSnapshot(path) == original)
        #expect(try SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
        #expect(try !SQLCipherShell.opens(path, with: ring.keys[1].shellKey))
    }
}

/// The database as the rotation writes it, except that one byte is flipped on its way to the disk
/// (the first write that covers it), as a faulty write path would.
final class CorruptingFile: RandomAccessFile, @unchecked Sendable {
    private let base: any RandomAccessFile
    private let target: Int64
    private let counter: EventCounter

    init(_ base: any RandomAccessFile, byteAt target: Int64, counter: EventCounter) {
        self.base = base
        self.target = target
        self.counter = counter
    }

    var path: String { base.path }
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(FileSystemError) -> Int { try base.read(into: buffer, at: offset) }
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(FileSystemError) {
        guard (offset..<offset + Int64(bytes.count)).contains(target), counter.count == 0 else {
            return try base.write(bytes, at: offset)
        }
        _ = counter.next()
        let spoiled = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 64)
        defer { spoiled.deallocate() }
        spoiled.copyMemory(from: bytes)
        spoiled[Int(target - offset)] ^= 0x01
        try base.write(UnsafeRawBufferPointer(spoiled), at: offset)
    }
    func synchronize() throws(FileSystemError) { try base.synchronize() }
    func size() throws(FileSystemError) -> Int64 { try base.size() }
    func close() { base.close() }
}
