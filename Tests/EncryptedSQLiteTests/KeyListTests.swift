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
            ([.init(id: "a", source: .file(path: directory.path))], [:], .keyFileUnreadable(path: directory.path, keyID: "a", database: "db", reason: "not a regular file")),
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
