import CipherFormats
@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import SQLCipherConnection
import Testing
import TestSupport

/// `true` when the linked engine is SQLCipher 4 (its own format by default, every generation readable).
private let onSQLCipher4 = SQLCipherEngine.linked.major >= 4

@Suite("File formats: the engine's own format, every generation, settings the engine cannot apply", .ownThread)
struct FileFormatTests {
    @Test("a file the engine's own sqlcipher shell writes with its defaults (passphrase, 5,000 rows, user_version 7) opens with the current key of a 5-key list in one attempt, and rotates")
    func shellDefaultFile() throws {
        let directory = TemporaryDirectory("format-shell")
        let ring = TestKeyring([.passphrase, .hex, .passphrase, .hex, .passphrase, .hex], in: directory)
        let path = directory.file("app.sqlite")
        var sql = "CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT);\nBEGIN;\n"
        for index in 1...5000 { sql += "INSERT INTO notes(text) VALUES ('note \(index)');\n" }
        sql += "COMMIT;\nPRAGMA user_version = 7;"
        let made = try SQLCipherShell.run(path, key: ring.keys[4].shellKey, sql)
        #expect(made.status == 0, "\(made.stderr)")
        // The shell wrote its engine's default format.
        #expect(FileManager.default.fileExists(atPath: path))
        let pageSize = try SQLCipherShell.run(path, key: ring.keys[4].shellKey, "PRAGMA cipher_page_size;")
        #expect(pageSize.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == (onSQLCipher4 ? "4096" : "1024"))

        let five = try KeyList(database: path, keys: ring.keys.prefix(5).map(\.key))
        let opened = try EncryptedDatabase(path: path, keys: five)
        #expect(opened.report.attempts.map(\.keyID) == ["k5"])
        #expect(opened.report.isOnCurrentKey && !opened.report.rotated)
        #expect(try opened.read { try $0.queryValue("SELECT count(*) FROM notes", as: Int.self) } == 5000)
        #expect(try opened.read { try $0.userVersion() } == 7)

        let six = try KeyList(database: path, keys: ring.keys.map(\.key))
        let rotated = try EncryptedDatabase(path: path, keys: six)
        #expect(rotated.report.openedWithKeyID == "k5")
        #expect(rotated.report.rotated)
        #expect(try rotated.read { try $0.userVersion() } == 7)
        let shell = try SQLCipherShell.run(path, key: ring.keys[5].shellKey, "PRAGMA user_version; SELECT count(*) FROM notes; PRAGMA integrity_check;")
        #expect(shell.stdout == "7\n5000\nok\n")
        #expect(try !SQLCipherShell.opens(path, with: ring.keys[4].shellKey))
    }

    @Test("a 3.x file under a current key without settings: SQLCipher 4 upgrades it to its own format through the verified export (user_version, application_id, rows kept); SQLCipher 3 finds it current; a current key pinned to sqlcipher3 keeps it 3.x")
    func version3FileUnderCurrentKey() throws {
        let directory = TemporaryDirectory("format-3x")
        let ring = TestKeyring([.passphrase], in: directory)
        let path = directory.file("app.sqlite")
        let pinnedPath = directory.file("pinned.sqlite")
        for file in [path, pinnedPath] {
            // What a SQLCipher 3 host writes (the 3.4.1 shell ignores cipher_compatibility).
            let made = try SQLCipherShell.run(file, key: ring.keys[0].shellKey, "PRAGMA cipher_compatibility = 3;\n" + Fixture.sql(rows: 80))
            #expect(made.status == 0, "\(made.stderr)")
        }
        let version3 = try KeyList(database: path, keys: [DatabaseKey(id: "k1", source: ring.keys[0].key.source, cipher: CipherSettings(generation: .sqlcipher3))])
        let expected = try Fixture.digest(of: path, with: version3)

        let keys = try ring.keyList(database: path)
        let check = try EncryptedDatabase.check(path: path, keys: keys)
        #expect(check.openedWithKeyID == "k1")
        #expect(check.needsRotation == onSQLCipher4)

        let database = try EncryptedDatabase(path: path, keys: keys)
        #expect(database.report.openedWithKeyID == "k1")
        #expect(database.report.isOnCurrentKey)
        #expect(database.report.openedInCurrentFormat == !onSQLCipher4)
        #expect(database.report.rotation?.method == (onSQLCipher4 ? .export : nil))
        #expect(try database.read { try Fixture.contentDigest($0) } == expected)
        #expect(try database.read { try $0.queryValue("PRAGMA cipher_page_size", as: String.self) } == enginePageSize)
        #expect(try SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
        // Now in the engine's own format: the next open is one attempt and rotates nothing.
        let again = try EncryptedDatabase(path: path, keys: keys)
        #expect(again.report.attempts.count == 1 && !again.report.rotated && again.report.openedInCurrentFormat)

        // Pinned to the 3.x format (fleets with SQLCipher 3 hosts): nothing to do, and the file stays 3.x.
        let pinned = try KeyList(database: pinnedPath, keys: [DatabaseKey(id: "k1", source: ring.keys[0].key.source, cipher: CipherSettings(generation: .sqlcipher3))])
        let snapshot = FileSnapshot(pinnedPath)
        let kept = try EncryptedDatabase(path: pinnedPath, keys: pinned)
        #expect(!kept.report.rotated && kept.report.openedInCurrentFormat)
        #expect(try kept.read { try $0.queryValue("PRAGMA cipher_page_size", as: String.self) } == "1024")
        #expect(FileSnapshot(pinnedPath).bytes == snapshot.bytes)
    }

    @Test("the SQLCipher 4 diagnosis only weighs keys whose settings leave out SQLCipher 4's format: on SQLCipher 4 a key without settings was just tried in it, so a match would mean the file changed during the probe (a noKeyOpens, probed again), not wrong settings")
    func diagnosisCandidates() throws {
        let keys = try KeyList(database: "/nonexistent/app.sqlite", keys: [
            DatabaseKey(id: "pinned3", source: .hex(TestKeys.hex()), cipher: CipherSettings(generation: .sqlcipher3)),
            DatabaseKey(id: "no-settings", source: .hex(TestKeys.hex())),
            DatabaseKey(id: "pages-2k", source: .hex(TestKeys.hex()), cipher: CipherSettings(pageSize: 2048)),
        ])
        #expect(KeyProbe.diagnosable(keys.keys).map(\.id) == (onSQLCipher4 ? ["pinned3", "pages-2k"] : ["pinned3", "no-settings", "pages-2k"]))
    }

    @Test("an older key without settings opens the 3.x file a SQLCipher 3 host wrote with it; the rotation writes the engine's own format")
    func oldKeyVersion3File() throws {
        let directory = TemporaryDirectory("format-old3x")
        let ring = TestKeyring([.passphrase, .hex], in: directory)
        let path = directory.file("app.sqlite")
        let made = try SQLCipherShell.run(path, key: ring.keys[0].shellKey, "PRAGMA cipher_compatibility = 3;\n" + Fixture.sql(rows: 50))
        #expect(made.status == 0, "\(made.stderr)")
        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path))
        #expect(database.report.openedWithKeyID == "k1")
        #expect(database.report.rotation?.method == (onSQLCipher4 ? .export : .pageReencryption))
        #expect(try database.read { try $0.userVersion() } == 42)
        #expect(try database.read { try $0.applicationID() } == 1_234_567)
        let shell = try SQLCipherShell.run(path, key: ring.keys[1].shellKey, "PRAGMA cipher_page_size; SELECT count(*) FROM people;")
        #expect(shell.stdout == "\(enginePageSize)\n50\n")
    }

    @Test("a new database gets the engine's own format, and the engine's shell opens it with its defaults")
    func newDatabaseFormat() throws {
        let directory = TemporaryDirectory("format-new")
        let ring = TestKeyring([.passphrase], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithLibrary(at: path, keys: ring.keyList(database: path), rows: 20)
        let shell = try SQLCipherShell.run(path, key: ring.keys[0].shellKey, "PRAGMA cipher_page_size; SELECT count(*) FROM people;")
        #expect(shell.stdout == "\(enginePageSize)\n20\n")
        let state = try DatabaseInspection.state(path: path, keys: ring.keyList(database: path))
        #expect(state.format == (onSQLCipher4 ? "kdf_iter 256000 (sha512), page_size 4096, hmac sha512" : "kdf_iter 64000 (sha1), page_size 1024, hmac sha1"))
    }

    @Test("settings the linked engine cannot apply are refused when the key list is built; SQLCipher 4 applies them all")
    func engineValidation() throws {
        let settings: [CipherSettings] = [
            CipherSettings(generation: .sqlcipher4),
            CipherSettings(kdfAlgorithm: .sha256),
            CipherSettings(hmacAlgorithm: .sha512),
        ]
        for cipher in settings {
            let build = { try KeyList(database: "db", keys: [DatabaseKey(id: "a", source: .hex(TestKeys.hex()), cipher: cipher)]) }
            if onSQLCipher4 {
                _ = try build()
            } else {
                do {
                    _ = try build()
                    Issue.record("SQLCipher 3 accepted \(cipher)")
                } catch let error as KeyConfigurationError {
                    guard case let .invalidCipherSettings(keyID, _, problem) = error else { Issue.record("\(error)"); continue }
                    #expect(keyID == "a")
                    #expect(problem.contains("needs SQLCipher 4") && problem.contains("the linked SQLCipher \(SQLCipherEngine.linked.version)"))
                }
            }
        }
        // Refused on every engine.
        #expect(throws: KeyConfigurationError.invalidCipherSettings(keyID: "a", database: "db", problem: "plaintext_header_size must be 0: a file with a plaintext header keeps its salt outside the file, which this library does not support")) {
            try KeyList(database: "db", keys: [DatabaseKey(id: "a", source: .hex(TestKeys.hex()), cipher: CipherSettings(plaintextHeaderSize: 32))])
        }
        #expect(throws: KeyConfigurationError.invalidCipherSettings(keyID: "a", database: "db", problem: "fast_kdf_iter must be from 1 to 2147483647")) {
            try KeyList(database: "db", keys: [DatabaseKey(id: "a", source: .hex(TestKeys.hex()), cipher: CipherSettings(fastKDFIterations: 0))])
        }
    }

    @Test("a SHA-256 format with its own settings (SQLCipher 4 only) opens with them and rotates to the default format through the export",
          .enabled(if: onSQLCipher4, "SQLCipher 3.4.1 cannot write SHA-256 files: sha256FormatRefusedOnSQLCipher3"))
    func sha256Format() throws {
        let directory = TemporaryDirectory("format-sha256")
        let ring = TestKeyring([.passphrase, .hex], in: directory)
        let path = directory.file("app.sqlite")
        let pragmas = "PRAGMA cipher_kdf_algorithm = PBKDF2_HMAC_SHA256; PRAGMA cipher_hmac_algorithm = HMAC_SHA256; PRAGMA kdf_iter = 20000;\n"
        let made = try SQLCipherShell.run(path, key: ring.keys[0].shellKey, pragmas + Fixture.sql(rows: 30))
        #expect(made.status == 0, "\(made.stderr)")
        let old = DatabaseKey(id: "k1", source: ring.keys[0].key.source, cipher: CipherSettings(kdfIterations: 20000, kdfAlgorithm: .sha256, hmacAlgorithm: .sha256))
        let database = try EncryptedDatabase(path: path, keys: KeyList(database: path, keys: [old, ring.keys[1].key]))
        #expect(database.report.openedWithKeyID == "k1")
        #expect(database.report.rotation?.method == .export)
        #expect(try database.read { try $0.userVersion() } == 42)
        #expect(try SQLCipherShell.opens(path, with: ring.keys[1].shellKey))
    }

    @Test("the same SHA-256 key on SQLCipher 3.4.1 is refused when its key list is built, naming the setting, and the file is not touched",
          .enabled(if: !onSQLCipher4, "SQLCipher 4 applies the settings: sha256Format"))
    func sha256FormatRefusedOnSQLCipher3() throws {
        let directory = TemporaryDirectory("format-sha256-3")
        let ring = TestKeyring([.passphrase, .hex], in: directory)
        let path = directory.file("app.sqlite")
        let made = try SQLCipherShell.run(path, key: ring.keys[0].shellKey, "PRAGMA kdf_iter = 20000;\n" + Fixture.sql(rows: 30))
        #expect(made.status == 0, "\(made.stderr)")
        let snapshot = FileSnapshot(path)
        let old = DatabaseKey(id: "k1", source: ring.keys[0].key.source, cipher: CipherSettings(kdfIterations: 20000, kdfAlgorithm: .sha256, hmacAlgorithm: .sha256))
        let problem = "kdf_algorithm sha256 needs SQLCipher 4; the linked SQLCipher \(SQLCipherEngine.linked.version) cannot read or write such files (use a host linked with SQLCipher 4, or leave the setting out)"
        #expect(throws: KeyConfigurationError.invalidCipherSettings(keyID: "k1", database: path, problem: problem)) {
            _ = try EncryptedDatabase(path: path, keys: KeyList(database: path, keys: [old, ring.keys[1].key]))
        }
        #expect(FileSnapshot(path) == snapshot)
        // Without the SHA-256 settings the 3.4.1 file opens with the same key and rotates.
        let sha1 = DatabaseKey(id: "k1", source: ring.keys[0].key.source, cipher: CipherSettings(kdfIterations: 20000))
        let database = try EncryptedDatabase(path: path, keys: KeyList(database: path, keys: [sha1, ring.keys[1].key]))
        #expect(database.report.openedWithKeyID == "k1")
        #expect(try database.read { try $0.userVersion() } == 42)
    }

    @Test("the Keys file names a generation (cipher: sqlcipher3) or any setting; bad values are errors naming the place")
    func keysFileForms() throws {
        let directory = TemporaryDirectory("format-keys")
        let hex = TestKeys.hex()
        func load(_ cipher: String) throws -> KeysFile {
            let yaml = "databases:\n  - path: app.sqlite\n    keys:\n      - id: a\n        hex: \"\(hex)\"\n        cipher: \(cipher)\n"
            let path = directory.file("Keys")
            try Data(yaml.utf8).write(to: URL(fileURLWithPath: path))
            chmod(path, 0o600)
            return try KeysFile.load(path: path)
        }
        func cipher(_ text: String) throws -> CipherSettings {
            try load(text).entries[0].keys[0].cipher
        }
        #expect(try cipher("sqlcipher3") == CipherSettings(generation: .sqlcipher3))
        #expect(try cipher("SQLCipher1") == CipherSettings(generation: .sqlcipher1))
        #expect(try cipher("{compatibility: 2, hmac_pgno: be, hmac_salt_mask: \"00\", fast_kdf_iter: 4000, use_hmac: true}")
                == CipherSettings(generation: .sqlcipher2, useHMAC: true, hmacPageNumber: .bigEndian, hmacSaltMask: 0, fastKDFIterations: 4000))
        #expect(try cipher("{kdf_iter: 500000, page_size: 8192, kdf_algorithm: SHA256, hmac_algorithm: sha512, plaintext_header_size: 0, hmac_salt_mask: 0x3a}")
                == CipherSettings(kdfIterations: 500_000, pageSize: 8192, kdfAlgorithm: .sha256, hmacAlgorithm: .sha512, plaintextHeaderSize: 0, hmacSaltMask: 0x3a))
        let keysPath = directory.file("Keys")
        let bad: [(String, String, String)] = [
            ("sqlcipher5", "databases[0].keys[0].cipher", "cipher must be one of sqlcipher1, sqlcipher2, sqlcipher3, sqlcipher4, or a mapping of settings"),
            ("{compatibility: 7}", "databases[0].keys[0].cipher.compatibility", "compatibility must be 1, 2, 3 or 4 (the SQLCipher generation whose defaults apply)"),
            ("{kdf_algorithm: md5}", "databases[0].keys[0].cipher.kdf_algorithm", "kdf_algorithm must be one of: sha1, sha256, sha512"),
            ("{hmac_pgno: middle}", "databases[0].keys[0].cipher.hmac_pgno", "hmac_pgno must be le or be"),
            ("{hmac_salt_mask: zz}", "databases[0].keys[0].cipher.hmac_salt_mask", "hmac_salt_mask must be one byte in hex, such as \"3a\" or \"0x00\""),
        ]
        for (text, location, problem) in bad {
            #expect(throws: KeyConfigurationError.keysFileInvalid(path: keysPath, location: location, problem: problem)) { try load(text) }
        }
    }

    @Test("a statement that fails only because the engine's SQLite is too old says so: the feature, the version that added it, the linked version")
    func tooOldSQLite() throws {
        let directory = TemporaryDirectory("format-features")
        let ring = TestKeyring([.hex], in: directory)
        let path = directory.file("app.sqlite")
        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: OpenOptions(createIfMissing: true))
        try database.write { try $0.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT UNIQUE, n INTEGER)") }
        let statements: [(String, String, String)] = [
            ("INSERT INTO t(name) VALUES ('a') RETURNING id", "RETURNING", "3.35.0"),
            ("INSERT INTO t(name) VALUES ('a') ON CONFLICT(name) DO UPDATE SET n = 1", "UPSERT (ON CONFLICT … DO)", "3.24.0"),
            ("SELECT id, row_number() OVER (ORDER BY id) FROM t", "window functions (OVER, WINDOW)", "3.25.0"),
            ("ALTER TABLE t RENAME COLUMN n TO m", "ALTER TABLE … RENAME COLUMN", "3.25.0"),
            ("SELECT iif(1, 2, 3)", "iif()", "3.32.0"),
            ("SELECT a.id FROM t AS a RIGHT JOIN t AS b ON a.id = b.id", "RIGHT and FULL OUTER JOIN", "3.39.0"),
        ]
        let linked = SQLiteFeature.linkedVersion
        for (sql, feature, since) in statements {
            if SQLiteFeature.isNewer(since, than: linked) {
                do {
                    try database.write { try $0.execute(sql) }
                    Issue.record("SQLite \(linked) ran \(sql)")
                } catch let error as SQLiteError {
                    #expect(error.missingFeature?.name == feature, "\(sql)")
                    #expect(error.description.contains("\(feature) needs SQLite \(since), and the linked SQLCipher carries SQLite \(linked)"))
                }
            } else {
                try database.write { try $0.execute(sql) }
            }
        }
        // An ordinary syntax error names no feature.
        do {
            try database.write { try $0.execute("SELEKT 1") }
        } catch let error as SQLiteError {
            #expect(error.missingFeature == nil)
            #expect(!error.description.contains("needs SQLite"))
        }
        #expect(SQLCipherEngine.linked.sqliteVersion == linked)
    }
}
