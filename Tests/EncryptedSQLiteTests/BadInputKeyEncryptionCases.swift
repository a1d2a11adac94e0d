import EncryptedSQLite
import Foundation
import TestSupport

/// The bad-input cases of key-encryption keys and wrapped data keys: each Keys file holds a KEK
/// list and a wrapped data key appended to `app.sqlite`'s good keys; `app.sqlite` is on a good key.
let keyEncryptionMatrixCases: [String: @Sendable (MatrixContext) throws -> MatrixOutcome] = [
    "keys.kekWrong": { c in
        let other = try LocalKeyEncryptionKey(id: "kek-a", key: DataKey(copying: TestKEK.randomBytes()))
        let value = try TestKEK.wrap(with: other, dataKeyID: "data-1")
        return try c.keyEncryptionCase(keks: TestKEK.hexEntry(c, id: "kek-a"), wrapped: TestKEK.entry(id: "data-1", value), mustName: [c.db, "data-1", "kek-a"])
    },
    "keys.wrappedTampered": { c in
        let (keks, kek) = try TestKEK.hexKEK(c, id: "kek-a")
        var bytes = try TestKEK.wrap(with: kek, dataKeyID: "data-1").bytes
        bytes[20] ^= 0x01
        return try c.keyEncryptionCase(keks: keks, wrapped: TestKEK.entry(id: "data-1", WrappedDataKey(bytes: bytes, wrappedBy: "kek-a")), mustName: [c.db, "data-1", "kek-a"])
    },
    "keys.wrappedMoved": { c in
        let (keks, kek) = try TestKEK.hexKEK(c, id: "kek-a")
        let value = try TestKEK.wrap(with: kek, dataKeyID: "data-for-other-entry")
        return try c.keyEncryptionCase(keks: keks, wrapped: TestKEK.entry(id: "data-1", value), mustName: [c.db, "data-1", "kek-a"])
    },
    "keys.wrappedRelabelled": { c in
        let (first, kekA) = try TestKEK.hexKEK(c, id: "kek-a")
        let (second, _) = try TestKEK.hexKEK(c, id: "kek-b")
        let value = try TestKEK.wrap(with: kekA, dataKeyID: "data-1")
        let relabelled = WrappedDataKey(bytes: value.bytes, wrappedBy: "kek-b")
        return try c.keyEncryptionCase(keks: first + second, wrapped: TestKEK.entry(id: "data-1", relabelled), mustName: [c.db, "data-1", "kek-b"])
    },
    "keys.kekNotListed": { c in
        let (keks, kek) = try TestKEK.hexKEK(c, id: "kek-a")
        let value = try TestKEK.wrap(with: kek, dataKeyID: "data-1")
        return try c.keyEncryptionCase(keks: keks, wrapped: TestKEK.entry(id: "data-1", WrappedDataKey(bytes: value.bytes, wrappedBy: "kek-gone")), mustName: [c.db, "data-1", "kek-gone", "kek-a"])
    },
    "keys.kekNoSalt": { c in
        let keks = "  - id: kek-a\n    passphrase: \"\(c.passphrase("kek"))\"\n"
        return try c.keyEncryptionCase(keks: keks, wrapped: "", mustName: [c.keysPath, "kek-a"])
    },
    "keys.kekEnvUnset": { c in
        let (_, kek) = try TestKEK.hexKEK(c, id: "kek-a")
        let value = try TestKEK.wrap(with: kek, dataKeyID: "data-1")
        let keks = "  - id: kek-a\n    env: TEST_KEK_NOT_SET\n    format: hex\n"
        return try c.keyEncryptionCase(keks: keks, wrapped: TestKEK.entry(id: "data-1", value), mustName: ["kek-a", "TEST_KEK_NOT_SET"])
    },
    "keys.pinInKeysFile": { c in
        let pin = c.secret("pin-\(UInt32.random(in: 100_000...999_999))")
        let keks = "  - id: hsm\n    pkcs11:\n      module: /usr/lib/softhsm/libsofthsm2.so\n      token: app\n      key: kek\n      pin: \"\(pin)\"\n"
        return try c.keyEncryptionCase(keks: keks, wrapped: "", mustName: [c.keysPath])
    },
    // `pin:` beside a PIN source: refused for the plaintext PIN, not accepted because the source is there.
    "keys.pinBesidePinEnv": { c in
        let pin = c.secret("pin-\(UInt32.random(in: 100_000...999_999))")
        let keks = "  - id: hsm\n    pkcs11:\n      module: /usr/lib/softhsm/libsofthsm2.so\n      token: app\n      key: kek\n      pin_env: HSM_PIN\n      pin: \"\(pin)\"\n"
        return try c.keyEncryptionCase(keks: keks, wrapped: "", mustName: [c.keysPath])
    },
    "keys.pinBesidePinFile": { c in
        let pin = c.secret("pin-\(UInt32.random(in: 100_000...999_999))")
        c.write(pin, to: "hsm.pin")
        chmod(c.directory.file("hsm.pin"), 0o600)
        let keks = "  - id: hsm\n    pkcs11:\n      module: /usr/lib/softhsm/libsofthsm2.so\n      token: app\n      key: kek\n      pin: \"\(pin)\"\n      pin_file: hsm.pin\n"
        return try c.keyEncryptionCase(keks: keks, wrapped: "", mustName: [c.keysPath])
    },
    "keys.wrappedHalf": { c in
        let (keks, _) = try TestKEK.hexKEK(c, id: "kek-a")
        return try c.keyEncryptionCase(keks: keks, wrapped: "      - id: data-1\n        wrapped_by: kek-a\n", mustName: [c.keysPath, "data-1"])
    },
    "keys.wrappedNotBase64": { c in
        let (keks, _) = try TestKEK.hexKEK(c, id: "kek-a")
        return try c.keyEncryptionCase(keks: keks, wrapped: "      - id: data-1\n        wrapped_by: kek-a\n        wrapped_key: \"not*base64!\"\n", mustName: [c.keysPath, "data-1"])
    },
    "keys.pkcs11WrongPIN": { c in try c.pkcs11Case(token: SoftHSMToken.pinToken, key: "kek-a", pin: SoftHSMToken.wrongPIN, mustName: ["hsm-1", SoftHSMToken.pinToken]) },
    "keys.pkcs11NoModule": { c in
        try c.pkcs11Case(module: c.directory.file("no-such-module.so"), token: SoftHSMToken.mainToken, key: "kek-a", mustName: ["hsm-1", c.directory.file("no-such-module.so")])
    },
    "keys.pkcs11NoToken": { c in try c.pkcs11Case(token: "no-such-token", key: "kek-a", mustName: ["hsm-1", "no-such-token"]) },
    "keys.pkcs11NoKey": { c in try c.pkcs11Case(token: SoftHSMToken.mainToken, key: "no-such-key", mustName: ["hsm-1", "no-such-key"]) },
    "keys.credentialOutsideService": { c in
        try c.keyEncryptionCase(keks: nil, wrapped: "      - id: data-1\n        credential: app-db-key\n        format: hex\n", mustName: [c.db, "data-1", "app-db-key"])
    },
]

extension MatrixContext {
    /// A Keys file whose wrapped data key names a PKCS#11 KEK on a SoftHSM2 token of this test
    /// process (``SoftHSMToken``), its PIN from the environment given to the open; the PIN is one
    /// of the secrets no message may hold.
    func pkcs11Case(module: String = SoftHSMToken.module, token: String, key: String, pin: String = SoftHSMToken.pin, mustName: [String]) throws -> MatrixOutcome {
        guard SoftHSMToken.testsEnabled else { return .skip("SoftHSM2 is not installed (scripts/setup.sh installs it)") }
        _ = try SoftHSMToken.configuration()
        _ = secret(pin)
        let value = WrappedDataKey(bytes: TestKEK.randomBytes() + TestKEK.randomBytes().prefix(28), wrappedBy: "hsm-1")
        let keks = "  - id: hsm-1\n    pkcs11:\n      module: \(module)\n      token: \(token)\n      key: \(key)\n      pin_env: \(SoftHSMToken.pinVariable)\n"
        let text = writeKeys(TestKEK.entry(id: "data-1", value))
        write("key_encryption_keys:\n" + keks + text)
        return try keysCase(environment: [SoftHSMToken.pinVariable: pin], mustName: mustName)
    }

    /// Writes a Keys file with `keks` (items of `key_encryption_keys:`, or none) and `app.sqlite`'s
    /// good keys followed by `wrapped`, then loads it and opens `app.sqlite` (on a good key).
    func keyEncryptionCase(keks: String?, wrapped: String, mustName: [String]) throws -> MatrixOutcome {
        let text = writeKeys(wrapped)
        write((keks.map { "key_encryption_keys:\n" + $0 } ?? "") + text)
        return try keysCase(mustName: mustName)
    }
}

/// Key-encryption keys for the bad-input cases.
enum TestKEK {
    static func randomBytes() -> [UInt8] { (0..<32).map { _ in UInt8.random(in: 0...255) } }

    /// A `key_encryption_keys:` item for a new random hex KEK, and that KEK.
    static func hexKEK(_ c: MatrixContext, id: String) throws -> (String, LocalKeyEncryptionKey) {
        let bytes = randomBytes()
        let hex = c.secret(bytes.map { String(format: "%02x", $0) }.joined())
        return ("  - id: \(id)\n    hex: \(hex)\n", LocalKeyEncryptionKey(id: id, key: try DataKey(copying: bytes)))
    }

    /// A `key_encryption_keys:` item for a new random hex KEK.
    static func hexEntry(_ c: MatrixContext, id: String) throws -> String { try hexKEK(c, id: id).0 }

    /// A new random data key wrapped by `kek` for key entry `dataKeyID`.
    static func wrap(with kek: LocalKeyEncryptionKey, dataKeyID: String) throws -> WrappedDataKey {
        WrappedDataKey(bytes: try kek.wrap(DataKey.random(), context: KeyWrappingContext(dataKeyID: dataKeyID, keyEncryptionKeyID: kek.id)), wrappedBy: kek.id)
    }

    /// A key entry of `app.sqlite` holding `value`.
    static func entry(id: String, _ value: WrappedDataKey) -> String {
        "      - id: \(id)\n        wrapped_by: \(value.keyEncryptionKeyID)\n        wrapped_key: \"\(value.text)\"\n"
    }
}
