import DurableFiles
@testable import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// A file kind made by the independent sqlcipher shell with particular cipher settings.
struct ShellMadeKind: CustomTestStringConvertible, Sendable {
    let name: String
    /// Pragmas the shell runs after the key, before creating the fixture.
    let pragmas: String
    /// How the library's key entry describes such files.
    let cipher: CipherSettings
    let legacy: Bool
    var testDescription: String { name }
}

// `cipher_compatibility` makes a SQLCipher 4 shell write the generation meant; SQLCipher 3.4.1
// ignores the pragma (it writes these files through kdf_iter and the HMAC pragmas alone).
// SQLCipher 2.0 beta files change a process-wide setting; they are tested through `rekey`, in a
// process of their own (LegacyBetaCLITests).
let legacyAndCustomKinds: [ShellMadeKind] = [
    ShellMadeKind(name: "SQLCipher 1.x style (kdf_iter 4000, cipher_use_hmac OFF), legacy flag",
                  pragmas: "PRAGMA cipher_compatibility = 1; PRAGMA kdf_iter = 4000; PRAGMA cipher_use_hmac = OFF;", cipher: .engineDefault, legacy: true),
    ShellMadeKind(name: "SQLCipher 2.x style (kdf_iter 4000, HMAC on), legacy flag",
                  pragmas: "PRAGMA cipher_compatibility = 2; PRAGMA kdf_iter = 4000;", cipher: .engineDefault, legacy: true),
    ShellMadeKind(name: "SQLCipher 2.x from a big-endian host (cipher_hmac_pgno = be), legacy flag",
                  pragmas: "PRAGMA cipher_compatibility = 2; PRAGMA kdf_iter = 4000; PRAGMA cipher_hmac_pgno = be;", cipher: .engineDefault, legacy: true),
    ShellMadeKind(name: "SQLCipher 2.x big-endian, given as explicit settings (compatibility 2, hmac_pgno be)",
                  pragmas: "PRAGMA cipher_compatibility = 2; PRAGMA kdf_iter = 4000; PRAGMA cipher_hmac_pgno = be;",
                  cipher: CipherSettings(generation: .sqlcipher2, hmacPageNumber: .bigEndian), legacy: false),
    ShellMadeKind(name: "kdf_iter 4000 without HMAC, given as explicit settings",
                  pragmas: "PRAGMA kdf_iter = 4000; PRAGMA cipher_use_hmac = OFF;", cipher: CipherSettings(kdfIterations: 4000, useHMAC: false), legacy: false),
    ShellMadeKind(name: "4 KiB pages and kdf_iter 10000",
                  pragmas: "PRAGMA cipher_page_size = 4096; PRAGMA kdf_iter = 10000;", cipher: CipherSettings(kdfIterations: 10000, pageSize: 4096), legacy: false),
]

/// The page size of a file written with the linked engine's default format.
let enginePageSize = SQLCipherEngine.linked.defaultGeneration == .sqlcipher4 ? "4096" : "1024"

@Suite("Cipher settings, legacy files and settings changes", .ownThread)
struct CipherSettingsTests {
    @Test("files with other settings open with a key that carries them, and are rewritten to the current key's settings",
          arguments: legacyAndCustomKinds)
    func upgradesToCurrent(kind: ShellMadeKind) throws {
        let directory = TemporaryDirectory("settings")
        let passphrase = TestKeys.passphrase("old")
        let currentHex = TestKeys.hex()
        let path = directory.file("app.sqlite")
        let made = try SQLCipherShell.run(path, key: .passphrase(passphrase), kind.pragmas + "\n" + Fixture.sql(rows: 120))
        #expect(made.status == 0, "\(made.stderr)")
        let old = DatabaseKey(id: "old", source: .passphrase(passphrase), cipher: kind.cipher, legacy: kind.legacy)
        let oldOnly = try KeyList(database: path, keys: [old])
        let expected = try Fixture.digest(of: path, with: oldOnly)

        // Without its settings the key does not open the file; nothing changes.
        let snapshot = FileSnapshot(path)
        #expect(throws: EncryptedDatabaseError.noKeyOpens(path: path, triedKeyIDs: ["plain"])) {
            try EncryptedDatabase(path: path, keys: KeyList(database: path, keys: [DatabaseKey(id: "plain", source: .passphrase(passphrase))]))
        }
        #expect(FileSnapshot(path) == snapshot)

        let keys = try KeyList(database: path, keys: [old, DatabaseKey(id: "new", source: .hex(currentHex))])
        let database = try EncryptedDatabase(path: path, keys: keys)
        #expect(database.report.openedWithKeyID == "old")
        #expect(database.report.rotation?.method == .export)
        #expect(try database.read { try Fixture.contentDigest($0) } == expected)
        #expect(try database.read { try $0.queryValue("PRAGMA cipher_page_size", as: String.self) } == enginePageSize)
        // The independent shell: the new key with default settings opens it; the old key with the old settings no longer does.
        #expect(try SQLCipherShell.opens(path, with: .hex(currentHex)))
        let oldAttempt = try SQLCipherShell.run(path, key: .passphrase(passphrase), kind.pragmas + "\nSELECT count(*) FROM people;")
        #expect(oldAttempt.status != 0)
        let shell = try SQLCipherShell.run(path, key: .hex(currentHex), "PRAGMA user_version; PRAGMA application_id; SELECT count(*) FROM people;")
        #expect(shell.stdout == "42\n1234567\n120\n")
        #expect(databaseFiles(in: directory) == ["app.sqlite"])
    }

    @Test("a current key with other settings (same passphrase, kdf_iter 100000, 4 KiB pages) goes through the export path")
    func settingsOnlyRotation() throws {
        let directory = TemporaryDirectory("settings-change")
        let passphrase = TestKeys.passphrase("same")
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: .passphrase(passphrase), rows: 80)
        let before = DatabaseKey(id: "2024", source: .passphrase(passphrase))
        let expected = try Fixture.digest(of: path, with: KeyList(database: path, keys: [before]))
        let after = DatabaseKey(id: "2025", source: .passphrase(passphrase), cipher: CipherSettings(kdfIterations: 100_000, pageSize: 4096))
        let database = try EncryptedDatabase(path: path, keys: KeyList(database: path, keys: [before, after]))
        #expect(database.report.rotation?.method == .export)
        #expect(try database.read { try Fixture.contentDigest($0) } == expected)
        #expect(try database.read { try $0.queryValue("PRAGMA cipher_page_size", as: String.self) } == "4096")
        #expect(try !SQLCipherShell.opens(path, with: .passphrase(passphrase)))
        let shell = try SQLCipherShell.run(path, key: .passphrase(passphrase), "PRAGMA cipher_page_size = 4096; PRAGMA kdf_iter = 100000; PRAGMA integrity_check; SELECT count(*) FROM people;")
        #expect(shell.stdout == "ok\n80\n", "\(shell.stderr)")
        #expect(FileSystem.size(of: path)! % 4096 == 0)
    }

    @Test("the same material twice is refused unless the settings differ")
    func duplicateMaterial() throws {
        let hex = TestKeys.hex()
        // The engine's default page size, given explicitly, is the same format as no settings.
        let defaultPageSize = SQLCipherEngine.linked.defaultGeneration.format.pageSize
        #expect(throws: KeyConfigurationError.duplicateKeyMaterial(keyID: "b", sameAs: "a", database: "db")) {
            try KeyList(database: "db", keys: [DatabaseKey(id: "a", source: .hex(hex)), DatabaseKey(id: "b", source: .hex(hex), cipher: CipherSettings(pageSize: defaultPageSize))])
        }
        _ = try KeyList(database: "db", keys: [DatabaseKey(id: "a", source: .hex(hex)), DatabaseKey(id: "b", source: .hex(hex), cipher: CipherSettings(pageSize: 2 * defaultPageSize))])
        #expect(throws: KeyConfigurationError.invalidCipherSettings(keyID: "a", database: "db", problem: "page_size must be a power of two from 512 to 65536")) {
            try KeyList(database: "db", keys: [DatabaseKey(id: "a", source: .hex(hex), cipher: CipherSettings(pageSize: 3000))])
        }
    }

    @Test("engine fact: PRAGMA cipher_migrate upgrades a kdf_iter 4000 file but drops application_id, so the library upgrades legacy files through its own export instead")
    func cipherMigrateLosesApplicationID() throws {
        let directory = TemporaryDirectory("migrate-fact")
        let path = directory.file("legacy.sqlite")
        let passphrase = TestKeys.passphrase("legacy")
        let made = try SQLCipherShell.run(path, key: .passphrase(passphrase), "PRAGMA cipher_compatibility = 1; PRAGMA kdf_iter = 4000; PRAGMA cipher_use_hmac = OFF;\n" + Fixture.sql(rows: 10))
        #expect(made.status == 0)
        let migrated = try SQLCipherShell.run(path, key: .passphrase(passphrase), "PRAGMA cipher_migrate; PRAGMA user_version; PRAGMA application_id;")
        if SQLCipherEngine.linked.major >= 4 {
            // SQLCipher 4's migrate keeps user_version; whether it keeps application_id is not relied on.
            #expect(migrated.stdout.hasPrefix("0\n42\n"), "\(migrated.stdout)")
        } else {
            #expect(migrated.stdout == "0\n42\n0\n", "\(migrated.stdout)")
        }
    }

    @Test("the linked engine is detected with PRAGMA cipher_version")
    func engineVersion() {
        #expect(SQLCipherEngine.linked.major >= 3)
        #expect(SQLCipherEngine.linked.version.hasPrefix("\(SQLCipherEngine.linked.major)."))
    }
}
