import EncryptedSQLite
import Foundation
import Testing
import TestSupport

@Suite("Key lists and key sources")
struct KeyListTests {
    let directory = TemporaryDirectory("keys")

    @Test("the current key is tried first, then the older keys from oldest to newest")
    func order() throws {
        let keys = try KeyList(database: "db", keys: ["a", "b", "c"].map { DatabaseKey(id: $0, source: .passphrase("p-\($0)")) })
        #expect(keys.ids == ["a", "b", "c"])
        #expect(keys.currentID == "c")
        #expect(keys.description == "KeyList(db: a, b, c*)")
    }

    @Test("every source resolves: passphrase, hex, environment, key file (passphrase, hex, binary)")
    func sources() throws {
        let hex = TestKeys.hex()
        let passFile = TestKeys.writeKeyFile("file passphrase\n", in: directory)
        let hexFile = TestKeys.writeKeyFile(hex.uppercased() + "\r\n", in: directory)
        let binaryPath = directory.file("binary.key")
        _ = FileManager.default.createFile(atPath: binaryPath, contents: Data((0..<32).map { UInt8($0) }))
        chmod(binaryPath, 0o400)
        let keys = try KeyList(database: "db", keys: [
            DatabaseKey(id: "p", source: .passphrase("pass")),
            DatabaseKey(id: "h", source: .hex(hex)),
            DatabaseKey(id: "e", source: .environment(variable: "TEST_KEY_E")),
            DatabaseKey(id: "eh", source: .environment(variable: "TEST_KEY_EH", format: .hex)),
            DatabaseKey(id: "fp", source: .file(path: passFile)),
            DatabaseKey(id: "fh", source: .file(path: hexFile, format: .hex)),
            DatabaseKey(id: "fb", source: .file(path: binaryPath, format: .binary)),
        ], environment: ["TEST_KEY_E": "env passphrase", "TEST_KEY_EH": TestKeys.hex()])
        #expect(keys.ids == ["p", "h", "e", "eh", "fp", "fh", "fb"])
    }

    @Test("each configuration mistake is a typed error naming the database and key id, never the key")
    func mistakes() throws {
        let secret = TestKeys.passphrase()
        let open = TestKeys.writeKeyFile(secret, in: directory, mode: 0o644)
        let groupReadable = TestKeys.writeKeyFile(secret, in: directory, mode: 0o640)
        let cases: [([DatabaseKey], [String: String], KeyConfigurationError)] = [
            ([], [:], .emptyKeyList(database: "db")),
            ([.init(id: " ", source: .passphrase(secret))], [:], .emptyKeyID(database: "db", position: 1)),
            ([.init(id: "a", source: .passphrase(secret)), .init(id: "a", source: .passphrase(secret + "2"))], [:], .duplicateKeyID("a", database: "db")),
            ([.init(id: "a", source: .passphrase(secret)), .init(id: "b", source: .passphrase(secret))], [:], .duplicateKeyMaterial(keyID: "b", sameAs: "a", database: "db")),
            ([.init(id: "a", source: .passphrase(""))], [:], .invalidMaterial(keyID: "a", database: "db", source: "passphrase", problem: .empty)),
            ([.init(id: "a", source: .hex("abc"))], [:], .invalidMaterial(keyID: "a", database: "db", source: "hex", problem: .wrongHexLength(digits: 3))),
            ([.init(id: "a", source: .hex(String(repeating: "a", count: 63) + "g"))], [:], .invalidMaterial(keyID: "a", database: "db", source: "hex", problem: .notHex(position: 64))),
            ([.init(id: "a", source: .environment(variable: "NOT_SET_ANYWHERE"))], [:], .environmentVariableUnset(variable: "NOT_SET_ANYWHERE", keyID: "a", database: "db")),
            ([.init(id: "a", source: .environment(variable: "EMPTY"))], ["EMPTY": ""], .invalidMaterial(keyID: "a", database: "db", source: "env EMPTY (passphrase)", problem: .empty)),
            ([.init(id: "a", source: .file(path: directory.file("absent")))], [:], .keyFileUnreadable(path: directory.file("absent"), keyID: "a", database: "db", reason: "No such file or directory")),
            ([.init(id: "a", source: .file(path: directory.path))], [:], .keyFileUnreadable(path: directory.path, keyID: "a", database: "db", reason: "a directory, not a regular file")),
            ([.init(id: "a", source: .file(path: open))], [:], .keyFileTooPermissive(path: open, mode: 0o644, keyID: "a", database: "db")),
            ([.init(id: "a", source: .file(path: groupReadable))], [:], .keyFileTooPermissive(path: groupReadable, mode: 0o640, keyID: "a", database: "db")),
            ([.init(id: "a", source: .file(path: TestKeys.writeKeyFile("short", in: directory), format: .binary))], [:], .invalidMaterial(keyID: "a", database: "db", source: "", problem: .wrongByteCount(bytes: 5))),
        ]
        for (keys, environment, expected) in cases {
            do {
                _ = try KeyList(database: "db", keys: keys, environment: environment)
                Issue.record("expected \(expected)")
            } catch {
                if case .invalidMaterial(_, _, _, let problem) = expected, case .invalidMaterial(let id, let database, _, let actual) = error {
                    #expect(problem == actual && id == "a" && database == "db")
                } else {
                    #expect(error == expected)
                }
                #expect(!error.description.contains(secret))
                #expect(error.description.contains("db"))
            }
        }
    }

    @Test("the chmod advice in a too-open key file error is right")
    func permissiveAdvice() throws {
        let path = TestKeys.writeKeyFile("x", in: directory, mode: 0o604)
        #expect {
            _ = try KeyList(database: "db", keys: [.init(id: "a", source: .file(path: path))], environment: [:])
        } throws: { error in
            "\(error)".contains("chmod 600 \(path)") && "\(error)".contains("604")
        }
    }

    @Test("key material never appears in description, debugDescription, interpolation or dump")
    func redaction() throws {
        let secret = TestKeys.passphrase()
        let hex = TestKeys.hex()
        let material = try KeyMaterial.passphrase(secret)
        let raw = try KeyMaterial.rawKey(hex: hex)
        let key = DatabaseKey(id: "visible-id", source: .passphrase(secret))
        let hexKey = DatabaseKey(id: "hex-id", source: .hex(hex))
        let list = try KeyList(database: "db", keys: [key, hexKey])
        var dumped = ""
        dump(material, to: &dumped)
        dump(raw, to: &dumped)
        dump(key, to: &dumped)
        dump(hexKey, to: &dumped)
        dump(list, to: &dumped)
        dump(KeySource.passphrase(secret), to: &dumped)
        let texts = [material.description, material.debugDescription, raw.description, "\(key)", "\(hexKey)", String(reflecting: key),
                     "\(list)", String(reflecting: list), key.source.description, dumped]
        for text in texts {
            #expect(!text.contains(secret) && !text.contains("MARKER"), "\(text)")
            #expect(!text.lowercased().contains(hex), "\(text)")
        }
        #expect(dumped.contains("visible-id"))
    }
}

@Suite("A raw key read as a passphrase")
struct HexKeyReadAsPassphraseTests {
    let directory = TemporaryDirectory("hexlike")

    /// A file encrypted by the `sqlcipher` shell with a raw key, and a Keys file whose current
    /// entry reads that key's hex file without `format: hex` (so as a passphrase).
    func setUp(hexFile contents: (String) -> String) throws -> (database: String, hex: String, keys: KeyList) {
        let hex = TestKeys.hex()
        let database = directory.file("app.sqlite")
        try Fixture.createWithShell(at: database, key: .hex(hex), rows: 20)
        _ = TestKeys.writeKeyFile(contents(hex), in: directory, name: "key.hex")
        let keysPath = directory.file("Keys")
        _ = FileManager.default.createFile(atPath: keysPath, contents: Data("""
            databases:
              - path: app.sqlite
                keys:
                  - id: old
                    passphrase: "an old passphrase"
                  - id: current
                    file: key.hex
            """.utf8), attributes: [.posixPermissions: 0o600])
        return (database, hex, try KeysFile.load(path: keysPath).keyList(forDatabase: database))
    }

    @Test("noKeyOpens names the key whose 64 hex digits were read as a passphrase and suggests format: hex",
          arguments: ["", "\n", "\r\n"])
    func named(newline: String) throws {
        let (database, hex, keys) = try setUp { $0.uppercased() + newline }
        let snapshot = FileSnapshot(database)
        do {
            _ = try EncryptedDatabase(path: database, keys: keys)
            Issue.record("the file opened")
        } catch {
            #expect(error == .noKeyOpens(path: database, triedKeyIDs: ["current", "old"], hexLikePassphraseKeyIDs: ["current"]))
            #expect(error.description.contains("Key \"current\" is read as a passphrase but holds exactly 64 hex digits"))
            #expect(error.description.contains("add `format: hex`"))
            #expect(!error.description.lowercased().contains(hex))
        }
        #expect(FileSnapshot(database) == snapshot)
        // With the format given, the same file opens.
        let fixed = try KeyList(database: database, keys: [DatabaseKey(id: "current", source: .file(path: directory.file("key.hex"), format: .hex))])
        #expect(try EncryptedDatabase.check(path: database, keys: fixed).openedWithKeyID == "current")
    }

    @Test("63 hex digits get no hint; a passphrase or environment variable of 64 hex digits does")
    func otherSources() throws {
        let (database, _, keys) = try setUp { String($0.dropLast()) + "\n" }  // 63 digits
        #expect(throws: EncryptedDatabaseError.noKeyOpens(path: database, triedKeyIDs: ["current", "old"])) {
            _ = try EncryptedDatabase(path: database, keys: keys)
        }
        let envKeys = try KeyList(database: database, keys: [
            DatabaseKey(id: "env", source: .environment(variable: "HEXLIKE")),
            DatabaseKey(id: "text", source: .passphrase(TestKeys.hex())),
        ], environment: ["HEXLIKE": TestKeys.hex() + "\n"])
        #expect(throws: EncryptedDatabaseError.noKeyOpens(path: database, triedKeyIDs: ["text", "env"], hexLikePassphraseKeyIDs: ["env", "text"])) {
            _ = try EncryptedDatabase.check(path: database, keys: envKeys)
        }
    }
}
