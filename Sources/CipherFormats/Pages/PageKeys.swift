import COpenSSLCrypto
import Foundation

/// The two keys that encrypt and authenticate the pages of one file: SQLCipher's key derivation
/// for one key material and one salt. Held in buffers that are zeroed when released.
package struct PageKeys: Sendable {
    package let salt: [UInt8]
    let encryption: SecretBytes
    let authentication: SecretBytes

    /// Derives the keys `material` gives on a file in `format` with `salt`, the way SQLCipher
    /// does; `nil` when the material is a key-plus-salt form for another salt, or the format has
    /// no HMAC.
    ///
    /// Like SQLCipher, the key's bytes decide: `x'<64 hex>'` is a raw key, `x'<96 hex>'` a raw key
    /// plus salt, anything else a passphrase (one run of the format's KDF).
    package static func derive(from material: KeyMaterial, salt: [UInt8], format: PageFormat) -> PageKeys? {
        guard format.hmac != nil, let encryption = encryptionKey(from: material, salt: salt, derivation: format.keyDerivation) else { return nil }
        let hmacSalt = salt.map { $0 ^ format.hmacSaltMask }
        let authentication = encryption.withUnsafeBytes { key in
            pbkdf2(key, salt: hmacSalt, derivation: PageFormat.KeyDerivation(algorithm: format.keyDerivation.algorithm, iterations: format.hmacKeyIterations))
        }
        guard let authentication else { return nil }
        return PageKeys(salt: salt, encryption: encryption, authentication: authentication)
    }

    /// The page encryption key `material` gives on a file with `salt`: the raw key itself, or
    /// PBKDF2 of the passphrase with `derivation`; `nil` for a key-plus-salt form for another salt.
    static func encryptionKey(from material: KeyMaterial, salt: [UInt8], derivation: PageFormat.KeyDerivation) -> SecretBytes? {
        guard salt.count == PageFormat.saltSize, derivation.iterations > 0 else { return nil }
        return material.withSQLCipherBytes { form in
            if let raw = rawKey(in: form, salt: salt) { return raw }
            if isRawKeyForm(form, hexDigits: 2 * (PageFormat.keySize + salt.count)) { return nil }  // a key for another salt
            Telemetry.kdfRun()
            return pbkdf2(form, salt: salt, derivation: derivation)
        }
    }

    /// PBKDF2 with `derivation` for a 32-byte key (``PBKDF2``).
    private static func pbkdf2(_ secret: UnsafeRawBufferPointer, salt: [UInt8], derivation: PageFormat.KeyDerivation) -> SecretBytes? {
        PBKDF2.derive(secret, salt: salt, iterations: derivation.iterations, digest: derivation.algorithm)
    }

    /// The `x'<64 hex key><32 hex salt>'` text that keys a connection on a file with these keys
    /// without a key derivation.
    var keySpec: KeyMaterial { Self.keySpec(key: encryption, salt: salt) }

    /// `x'<64 hex key><32 hex salt>'` for `key` and `salt`.
    static func keySpec(key encryption: SecretBytes, salt: [UInt8]) -> KeyMaterial {
        let form = SecretBytes(count: 3 + 2 * (PageFormat.keySize + salt.count)) { buffer in
            buffer[0] = UInt8(ascii: "x")
            buffer[1] = UInt8(ascii: "'")
            var index = 2
            func append(_ byte: UInt8) {
                Hex.write(byte, into: buffer, at: index)
                index += 2
            }
            encryption.withUnsafeBytes { key in key.forEach(append) }
            salt.forEach(append)
            buffer[index] = UInt8(ascii: "'")
        }
        return KeyMaterial(kind: .rawKey, sqlcipherForm: form)
    }

    /// The raw key in `x'<64 hex>'`, or in `x'<64 hex><32 hex salt>'` when that salt is `salt`.
    private static func rawKey(in form: UnsafeRawBufferPointer, salt: [UInt8]) -> SecretBytes? {
        let keyDigits = 2 * PageFormat.keySize
        if isRawKeyForm(form, hexDigits: keyDigits) {
            return SecretBytes(count: PageFormat.keySize) { _ = Hex.decode(form, from: 2, into: $0) }
        }
        if isRawKeyForm(form, hexDigits: keyDigits + 2 * salt.count) {
            var embedded = [UInt8](repeating: 0, count: salt.count)
            _ = embedded.withUnsafeMutableBytes { Hex.decode(form, from: 2 + keyDigits, into: $0) }
            guard embedded == salt else { return nil }
            return SecretBytes(count: PageFormat.keySize) { _ = Hex.decode(form, from: 2, into: $0) }
        }
        return nil
    }

    /// SQLCipher's test: exactly `x'` + `hexDigits` hex digits + one more byte.
    private static func isRawKeyForm(_ form: UnsafeRawBufferPointer, hexDigits: Int) -> Bool {
        guard form.count == hexDigits + 3, form[0] | 0x20 == UInt8(ascii: "x"), form[1] == UInt8(ascii: "'") else { return false }
        return (2..<(2 + hexDigits)).allSatisfy { Hex.value(of: form[$0]) != nil }
    }
}
