import CipherFormats
import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// Found by the configuration matrix: SQLCipher 4 answers `PRAGMA page_size` as text, SQLite and
/// SQLCipher 3.4.1 as an integer, so `queryValue(_:as: Int.self)` works on one engine only.
/// `Connection.integerPragma(_:)` reads both.
@Suite("Integer pragmas on every engine")
struct IntegerPragmaTests {
    @Test("integerPragma reads page_size, cipher_page_size, kdf_iter and user_version as numbers on the linked engine")
    func readsBothForms() throws {
        let directory = TemporaryDirectory("pragma")
        let path = directory.file("app.sqlite")
        let key = DatabaseKey(id: "k", source: .hex(TestKeys.hex()), cipher: CipherSettings(kdfIterations: 12_000, pageSize: 8192))
        let database = try EncryptedDatabase(path: path, keys: KeyList(database: path, keys: [key]), options: OpenOptions(createIfMissing: true))
        try database.write { db in try db.setUserVersion(7) }
        let values = try database.read { db in
            try ["page_size", "cipher_page_size", "kdf_iter", "user_version", "journal_mode"].map { try db.integerPragma($0) }
        }
        #expect(values == [8192, 8192, 12_000, 7, nil], "journal_mode's text is no number")
        // Why the method exists: on SQLCipher 4 the plain conversion refuses the text answer.
        let plain = try database.read { db in Result { try db.queryValue("PRAGMA page_size", as: Int.self) } }
        if SQLCipherEngine.linked.major >= 4 {
            #expect(throws: (any Error).self) { try plain.get() }
        } else {
            #expect(try plain.get() == 8192)
        }
    }
}
