import EncryptedSQLite
import Foundation
import KeyConfiguration
import Testing
import TestSupport

/// A Keys file whose KEK lives on a PKCS#11 token (SoftHSM2): `rekey --db` rotates a passphrase
/// database to a data key wrapped on the token, and a wrong PIN, a missing module, token or key,
/// or a tampered value stops it with a clear error, the PIN unshown and the file byte-identical.
@Suite("PKCS#11 key-encryption keys in a Keys file, through rekey (SoftHSM2)", .enabled(if: SoftHSMToken.testsEnabled, "SoftHSM2 is not installed: apt-get install softhsm2 opensc (scripts/setup.sh does)"), .ownThread)
struct PKCS11KeysFileTests {
    let directory = TemporaryDirectory("pkcs11-keys")
    let passphrase = TestKeys.passphrase()

    var database: String { directory.file("app.sqlite") }
    var keysFile: String { directory.file("Keys") }

    /// The Keys file text: the old passphrase key, then `data-2026` wrapped by the token's KEK.
    func yaml(wrapped: String, module: String = SoftHSMToken.module, token: String = SoftHSMToken.mainToken, key: String = "kek-a") -> String {
        """
        key_encryption_keys:
          - id: hsm-2026
            pkcs11:
              module: \(module)
              token: \(token)
              key: \(key)
              pin_env: \(SoftHSMToken.pinVariable)
        databases:
          - path: app.sqlite
            keys:
              - id: "k1"
                passphrase: "\(passphrase)"
              - id: "data-2026"
                wrapped_by: hsm-2026
                wrapped_key: "\(wrapped)"

        """
    }

    func writeKeys(_ text: String) throws {
        try text.write(toFile: keysFile, atomically: false, encoding: .utf8)
        chmod(keysFile, 0o600)
    }

    /// A database on the passphrase key with 20 rows, and the data key wrapped on the token.
    func prepare() throws -> (wrapped: String, dataKey: DataKey) {
        _ = try SoftHSMToken.configuration()
        let database = try EncryptedDatabase(
            path: database, keys: try KeyList(database: database, keys: [DatabaseKey(id: "k1", source: .passphrase(KeyText(passphrase)))]),
            options: OpenOptions(createIfMissing: true))
        try database.write { db in
            try db.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT)")
            for index in 0..<20 { try db.execute("INSERT INTO notes(text) VALUES (?)", ["note \(index)"]) }
        }
        let kek = try PKCS11KeyEncryptionKey(id: "hsm-2026", reference: SoftHSMToken.reference(), environment: [SoftHSMToken.pinVariable: SoftHSMToken.pin])
        let dataKey = DataKey.random()
        return (try KeyEncryptionKeyList([kek]).wrap(dataKey, dataKeyID: "data-2026").text, dataKey)
    }

    func rekey(pin: String = SoftHSMToken.pin) throws -> ProcessResult {
        try ProcessRunner.run(RekeyCLI.path, ["--db", database, "--keys", keysFile], environment: try SoftHSMToken.childEnvironment(pin: pin))
    }

    @Test("rekey --db rotates a passphrase database to a data key wrapped on the token; the library and the shell open it with that key only")
    func rotation() throws {
        let (wrapped, dataKey) = try prepare()
        try writeKeys(yaml(wrapped: wrapped))
        let result = try rekey()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(!(result.stdout + result.stderr).contains(SoftHSMToken.pin))
        let keys = try KeysFile.load(path: keysFile).keyList(forDatabase: database, environment: [SoftHSMToken.pinVariable: SoftHSMToken.pin])
        let opened = try EncryptedDatabase(path: database, keys: keys)
        #expect(opened.report.openedWithKeyID == "data-2026" && !opened.report.rotated)
        #expect(try opened.read { try $0.query("SELECT count(*) AS n FROM notes").first?.get("n", as: Int.self) } == 20)
        let hex = dataKey.withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() }
        #expect(try SQLCipherShell.opens(database, with: .hex(hex)))
        #expect(try !SQLCipherShell.opens(database, with: .passphrase(passphrase)))
    }

    @Test("a wrong PIN, a missing module, token or key, or a tampered value: rekey says which, never the PIN, and the file is byte-identical", arguments: Mistake.allCases)
    func mistakes(_ mistake: Mistake) throws {
        let (wrapped, _) = try prepare()
        var pin = SoftHSMToken.pin
        let expected: [String]
        switch mistake {
        case .wrongPIN:
            // A fresh process: its first login to the token, so the token checks the PIN. On the
            // token no test logs in to with the right PIN: a failed login rewrites the token's
            // state, and another test's login to that token meanwhile failed with
            // CKR_GENERAL_ERROR (the tampered case, once, in a CI run beside CPU burners).
            pin = SoftHSMToken.wrongPIN
            try writeKeys(yaml(wrapped: wrapped, token: SoftHSMToken.pinToken))
            expected = ["hsm-2026", "CKR_PIN_INCORRECT"]
        case .moduleMissing:
            try writeKeys(yaml(wrapped: wrapped, module: directory.file("libnothing.so")))
            expected = ["hsm-2026", "libnothing.so", "could not be loaded"]
        case .tokenMissing:
            try writeKeys(yaml(wrapped: wrapped, token: "no-such-token"))
            expected = ["hsm-2026", "no token \"no-such-token\"", "\"\(SoftHSMToken.mainToken)\""]
        case .keyMissing:
            try writeKeys(yaml(wrapped: wrapped, key: "no-such-key"))
            expected = ["hsm-2026", "no AES secret key labelled no-such-key"]
        case .tampered:
            var bytes = try #require(Data(base64Encoded: wrapped))
            bytes[30] ^= 0x01
            try writeKeys(yaml(wrapped: bytes.base64EncodedString()))
            expected = ["data-2026", "hsm-2026", "does not authenticate"]
        case .otherKEK:
            // A value made by the token's other key, relabelled as made by hsm-2026.
            let other = try PKCS11KeyEncryptionKey(id: "hsm-2026", reference: SoftHSMToken.reference(key: "kek-b"), environment: [SoftHSMToken.pinVariable: pin])
            try writeKeys(yaml(wrapped: try KeyEncryptionKeyList([other]).wrap(DataKey.random(), dataKeyID: "data-2026").text))
            expected = ["data-2026", "does not authenticate"]
        }
        let before = FileSnapshot(database)
        let keysBefore = try Data(contentsOf: URL(fileURLWithPath: keysFile))
        let result = try rekey(pin: pin)
        #expect(result.status != 0)
        for text in expected { #expect(result.stderr.contains(text), "\(mistake): \(result.stderr)") }
        for secret in [SoftHSMToken.pin, SoftHSMToken.wrongPIN] { #expect(!(result.stdout + result.stderr).contains(secret)) }
        #expect(FileSnapshot(database) == before)
        #expect(try Data(contentsOf: URL(fileURLWithPath: keysFile)) == keysBefore)
        #expect(try SQLCipherShell.opens(database, with: .passphrase(passphrase)))
    }

    enum Mistake: String, CaseIterable, Sendable, CustomStringConvertible {
        case wrongPIN, moduleMissing, tokenMissing, keyMissing, tampered, otherKEK
        var description: String { rawValue }
    }

    @Test("a pin: field in the Keys file is refused without showing its value")
    func pinInKeysFile() throws {
        let text = yaml(wrapped: "AAAA").replacingOccurrences(of: "pin_env: \(SoftHSMToken.pinVariable)", with: "pin: \"\(SoftHSMToken.pin)\"")
        #expect {
            try KeysFile(yaml: text, path: keysFile, baseDirectory: directory.path)
        } throws: { error in
            "\(error)".contains("never written in the Keys file") && !"\(error)".contains(SoftHSMToken.pin)
        }
    }
}
