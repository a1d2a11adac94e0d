import CipherFormats
import DurableFiles
@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Testing
import TestSupport

/// The journal mode of the file the engine-rekey verification looks at.
enum VerifiedJournalMode: String, CaseIterable, Sendable {
    case rollback, wal
}

@Suite("Engine rekey verification: \"still on the old key\" is claimed from every page, not page 1 alone", .ownThread)
struct EngineRekeyVerificationTests {
    @Test("a file whose page 1 opens with the old key but whose later page is encrypted with another key is reported as partly rewritten (verificationFailed naming the file and both key ids, no key bytes, advice to restore and keep -journal/-wal), not as a rotation that changed nothing; the file is byte-identical after",
          arguments: VerifiedJournalMode.allCases, BadPage.allCases)
    func partlyRewrittenFile(_ mode: VerifiedJournalMode, _ bad: BadPage) throws {
        let directory = TemporaryDirectory("rekey-verify-partial")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 1500, walMode: mode == .wal)
        let keys = try ring.keyList(database: path)
        let (from, to) = (keys.keys[0], keys.keys[1])
        let context = RotationContext(path: path, from: from, to: to, busyTimeout: .seconds(1), verification: .schema,
                                      logger: OpenOptions().logger, files: .system, workers: 1)

        // Control: on the untouched file every page reads with the old key, so the verification
        // says the rotation did not take effect (even with .schema, which checks nothing itself).
        #expect {
            _ = try EngineRekey().verify(in: context, detail: "test")
        } throws: { error in
            guard case .rotationNotApplied(path, "k1", "k2", _) = error as? EncryptedDatabaseError else { return false }
            return true
        }

        // One page after page 1 as a rekey that stopped part-way leaves it: decrypted with k1,
        // encrypted with k2 (same salt, as SQLCipher's rekey keeps it).
        let format = try #require(PageFormat(settings: from.cipher))
        var file = try Data(contentsOf: URL(fileURLWithPath: path))
        let size = format.pageSize
        let pageCount = file.count / size
        try #require(file.count % size == 0 && pageCount >= 6)
        let number = bad.number(pageCount: pageCount)
        try #require(number > 1 && number <= pageCount)
        let salt = Array(file.prefix(PageFormat.saltSize))
        let oldCipher = try pageCipher(from, salt: salt, format: format)
        let newCipher = try pageCipher(to, salt: salt, format: format)
        let range = (number - 1) * size..<number * size
        var plaintext = [UInt8](repeating: 0, count: size)
        var rewritten = [UInt8](repeating: 0, count: size)
        let random = (0..<format.reserve).map { _ in UInt8.random(in: 0...255) }
        try file.withUnsafeBytes { bytes in
            let page = UnsafeRawBufferPointer(rebasing: bytes[range])
            try #require(!PageCipher.isAllZeros(page), "page \(number) should hold data")
            try #require(plaintext.withUnsafeMutableBytes { oldCipher.decrypt(page, number: UInt32(number), into: $0) })
        }
        let encrypted = plaintext.withUnsafeBytes { page in
            random.withUnsafeBytes { random in
                rewritten.withUnsafeMutableBytes { newCipher.encrypt(page, number: UInt32(number), salt: salt, random: random, into: $0) }
            }
        }
        try #require(encrypted)
        file.replaceSubrange(range, with: rewritten)
        try file.write(to: URL(fileURLWithPath: path))
        try file.withUnsafeBytes { bytes in
            try #require(oldCipher.authenticates(UnsafeRawBufferPointer(rebasing: bytes[0..<size]), number: 1))
            try #require(!oldCipher.authenticates(UnsafeRawBufferPointer(rebasing: bytes[range]), number: UInt32(number)))
            try #require(newCipher.authenticates(UnsafeRawBufferPointer(rebasing: bytes[range]), number: UInt32(number)))
        }
        // Page 1 (and the schema) still opens with k1: what the verification used to rely on.
        #expect(try context.openFresh(with: from) != nil)
        #expect(try context.openFresh(with: to) == nil)

        let snapshot = FileSnapshot(path)
        #expect {
            _ = try EngineRekey().verify(in: context, detail: "sqlite3_rekey returned 0")
        } throws: { error in
            guard case .verificationFailed(path, "k2", let detail) = error as? EncryptedDatabaseError else { return false }
            let message = "\(error)"
            return detail.contains("partly rewritten") && detail.contains("\"k1\"") && detail.contains("\"k2\"")
                && message.hasPrefix(path) && message.contains("Restore the database from a backup")
                && message.contains("do not delete its -journal or -wal files")
                && !ring.keys.contains { message.localizedCaseInsensitiveContains($0.secret) }
        }
        // The verification wrote nothing and left no side file.
        #expect(FileSnapshot(path) == snapshot)
    }

    @Test("WAL mode, a reader holding an old snapshot so that the rekey's checkpoint cannot finish: the verification's fresh connection reads page 1 from the WAL's rekeyed frames, so the new key opens it (no false negative) while the database file itself is still on the old key")
    func walWithUnfinishedCheckpoint() throws {
        let directory = TemporaryDirectory("rekey-verify-wal")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 1500, walMode: true)
        let keys = try ring.keyList(database: path)
        let (from, to) = (keys.keys[0], keys.keys[1])
        let context = RotationContext(path: path, from: from, to: to, busyTimeout: .milliseconds(200), verification: .quickCheck,
                                      logger: OpenOptions().logger, files: .system, workers: 1)

        let reader = try Connection(path: path, access: .readWrite, key: from.cipherKey, busyTimeout: .seconds(1))
        defer { reader.close() }
        try reader.execute("BEGIN")
        #expect(try reader.queryValue("SELECT count(*) FROM people", as: Int.self) == 1500)

        let rotating = try Connection(path: path, access: .readWrite, key: from.cipherKey, busyTimeout: .milliseconds(200))
        try rotating.verifyReadable()
        guard case let .rotated(verified, report) = try EngineRekey().rotate(rotating, in: context) else {
            Issue.record("the engine's rekey declined")
            return
        }
        #expect(report.journalMode == "wal")
        #expect(try verified.queryValue("SELECT count(*) FROM people", as: Int.self) == 1500)
        verified.close()

        // The checkpoint could not finish: the rekeyed pages are only in the WAL, and the database
        // file's page 1 still authenticates with the old key, not the new one.
        #expect((FileSystem.size(of: path + "-wal") ?? 0) > 0)
        let format = try #require(PageFormat(settings: from.cipher))
        let file = try Data(contentsOf: URL(fileURLWithPath: path))
        let salt = Array(file.prefix(PageFormat.saltSize))
        let oldCipher = try pageCipher(from, salt: salt, format: format)
        let newCipher = try pageCipher(to, salt: salt, format: format)
        file.withUnsafeBytes { bytes in
            let page1 = UnsafeRawBufferPointer(rebasing: bytes[0..<format.pageSize])
            #expect(oldCipher.authenticates(page1, number: 1))
            #expect(!newCipher.authenticates(page1, number: 1))
        }
        // So a fresh connection reads through the WAL: the new key opens the file, the old does not.
        let again = try EngineRekey().verify(in: context, detail: "test")
        again.close()
        #expect(try context.openFresh(with: from) == nil)

        try reader.execute("COMMIT")
        reader.close()
        #expect(try SQLCipherShell.opens(path, with: ring.keys[1].shellKey))
        #expect(try !SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
    }

    /// The page layer's cipher for `key` on a file with `salt`.
    private func pageCipher(_ key: ResolvedKey, salt: [UInt8], format: PageFormat) throws -> PageCipher {
        let material = try #require(key.material)
        let keys = try #require(PageKeys.derive(from: material, salt: salt, format: format))
        return try #require(PageCipher(keys: keys, format: format))
    }
}
