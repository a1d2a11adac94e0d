import CipherFormats
@testable import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// The reader pool on keys whose cipher settings are not the engine's defaults. Pooled readers
/// were keyed with the key's bytes alone, so they got the engine's default settings: the open and
/// every write worked, and the first read through the pool failed with SQLite error 26.
@Suite("Reader pool: keys with other cipher settings")
struct ReaderPoolFormatTests {
    /// A setting of the issue's reproduction and the ones beside it. On SQLCipher 4 the 3.x
    /// generation is what fleets pin while SQLCipher 3 hosts remain.
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let cipher: CipherSettings
        let hex: Bool
        var testDescription: String { "\(name), \(hex ? "raw key" : "passphrase")" }
    }

    static let cases: [Case] = [
        Case(name: "kdf_iter 4000, 2 KiB pages", cipher: CipherSettings(kdfIterations: 4000, pageSize: 2048), hex: false),
        Case(name: "kdf_iter 4000, 4 KiB pages", cipher: CipherSettings(kdfIterations: 4000, pageSize: 4096), hex: false),
        Case(name: "8 KiB pages", cipher: CipherSettings(pageSize: 8192), hex: true),
        Case(name: "pinned to SQLCipher 3", cipher: CipherSettings(generation: .sqlcipher3), hex: false),
        Case(name: "pinned to SQLCipher 3", cipher: CipherSettings(generation: .sqlcipher3), hex: true),
        Case(name: "pinned to SQLCipher 3, 4 KiB pages", cipher: CipherSettings(generation: .sqlcipher3, pageSize: 4096), hex: false),
    ]

    static func key(_ id: String, _ testCase: Case) -> DatabaseKey {
        let secret = id == "old" ? "a" : "b"
        let source: KeySource = testCase.hex ? .hex(String(repeating: secret == "a" ? "1f" : "2e", count: 32)) : .passphrase("pool passphrase \(secret)")
        return DatabaseKey(id: id, source: source, cipher: testCase.cipher)
    }

    @Test("a new database: writes, then reads through a pool of 4, one at a time and concurrently", arguments: cases)
    func newDatabase(_ testCase: Case) async throws {
        let directory = TemporaryDirectory("pool-format")
        let path = directory.file("pool.sqlite")
        let keys = try KeyList(database: path, keys: [Self.key("new", testCase)])
        let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(createIfMissing: true, concurrentReaders: 4))
        try await database.write { db in
            try db.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, text TEXT)")
            for index in 0..<1000 { try db.execute("INSERT INTO items(text) VALUES (?)", ["row \(index)"]) }
        }
        #expect(try await database.read { try $0.queryValue("SELECT count(*) FROM sqlite_master", as: Int.self) } == 1)
        let counts = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<8 { group.addTask { try await database.read { try $0.queryValue("SELECT count(*) FROM items", as: Int.self) ?? -1 } } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(counts == Array(repeating: 1000, count: 8))
        // Four reads open at once: four pooled readers, each keyed as the key says.
        let held = try PooledReads.holdAtOnce(database, count: 4, { try $0.queryValue("SELECT count(*) FROM items", as: Int.self) ?? -1 }) {
            #expect((database.readers?.openCount ?? 0) == 4)
        }
        #expect(held == Array(repeating: 1000, count: 4))
        // The readers' key: the raw key plus salt derived once, with the key's own settings.
        let readerKey = try #require(database.readers?.readerKey)
        #expect(readerKey.material?.kind == .rawKey)
        #expect(readerKey.cipher == testCase.cipher)
        // The file is in the key's format: its page size as the key says.
        // (SQLCipher 4 answers PRAGMA page_size itself, as text: integerPragma reads both forms.)
        let pageSize = try await database.read { try $0.integerPragma("page_size") }
        #expect(pageSize == testCase.cipher.format().pageSize)
    }

    @Test("a file on an old key with those settings: rotated at open, then read through the pool", arguments: cases)
    func rotatedAtOpen(_ testCase: Case) throws {
        let directory = TemporaryDirectory("pool-format")
        let path = directory.file("pool.sqlite")
        let old = Self.key("old", testCase), new = Self.key("new", testCase)
        try Fixture.createWithLibrary(at: path, keys: try KeyList(database: path, keys: [old]), rows: 300, walMode: true)
        let before = try Fixture.digest(of: path, with: try KeyList(database: path, keys: [old]))
        let keys = try KeyList(database: path, keys: [old, new])
        let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(concurrentReaders: 4))
        #expect(database.report.rotated)
        #expect(try database.read { try Fixture.contentDigest($0) } == before)
        let held = try PooledReads.holdAtOnce(database, count: 4, { try Fixture.contentDigest($0) })
        #expect(held == Array(repeating: before, count: 4))
        try database.write { db in try db.execute("CREATE TABLE more(x)") }
        #expect(try database.read { try $0.queryValue("SELECT count(*) FROM sqlite_master WHERE name = 'more'", as: Int.self) } == 1)
    }
}
