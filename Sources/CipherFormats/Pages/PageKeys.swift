import COpenSSLCrypto
import Foundation

/// The two keys that encrypt and authenticate the pages of one file: SQLCipher's key derivation
/// for one key material and one salt. Held in buffers that are zeroed when released.
package struct PageKeys: Sendable {
    package let salt: [UInt8]
    let encryption: SecretBytes
    let authentication: SecretBytes

    /// Derives the keys `material` gives on a file with `salt` and `kdfIterations`, the way
    /// SQLCipher 3 does; `nil` when the material is a key-plus-salt form for another salt.
    ///
    /// Like SQLCipher, the key's bytes decide: `x'<64 hex>'` is a raw key, `x'<96 hex>'` a raw key
    /// plus salt, anything else a passphrase (one PBKDF2 run).
    package static func derive(from material: KeyMaterial, salt: [UInt8], kdfIterations: Int) -> PageKeys? {
        guard salt.count == SQLCipher3PageFormat.saltSize, kdfIterations > 0 else { return nil }
        let keySize = SQLCipher3PageFormat.keySize
        let encryption: SecretBytes? = material.withSQLCipherBytes { form in
            if let raw = rawKey(in: form, salt: salt) { return raw }
            if isRawKeyForm(form, hexDigits: 2 * (keySize + salt.count)) { return nil }  // a key for another salt
            return SecretBytes(count: keySize) { output in
                _ = PKCS5_PBKDF2_HMAC_SHA1(
                    form.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(form.count),
                    salt, Int32(salt.count), Int32(kdfIterations),
                    Int32(keySize), output.baseAddress?.assumingMemoryBound(to: UInt8.self))
            }
        }
        guard let encryption else { return nil }
        let hmacSalt = salt.map { $0 ^ SQLCipher3PageFormat.hmacSaltMask }
        let authentication = SecretBytes(count: keySize) { output in
            encryption.withUnsafeBytes { key in
                _ = PKCS5_PBKDF2_HMAC_SHA1(
                    key.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(key.count),
                    hmacSalt, Int32(hmacSalt.count), Int32(SQLCipher3PageFormat.hmacKeyIterations),
                    Int32(keySize), output.baseAddress?.assumingMemoryBound(to: UInt8.self))
            }
        }
        return PageKeys(salt: salt, encryption: encryption, authentication: authentication)
    }

    /// The `x'<64 hex key><32 hex salt>'` text that keys a connection on a file with these keys
    /// without a key derivation.
    package var keySpec: KeyMaterial {
        let form = SecretBytes(count: 3 + 2 * (SQLCipher3PageFormat.keySize + salt.count)) { buffer in
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
        let keyDigits = 2 * SQLCipher3PageFormat.keySize
        if isRawKeyForm(form, hexDigits: keyDigits) {
            return SecretBytes(count: SQLCipher3PageFormat.keySize) { _ = Hex.decode(form, from: 2, into: $0) }
        }
        if isRawKeyForm(form, hexDigits: keyDigits + 2 * salt.count) {
            var embedded = [UInt8](repeating: 0, count: salt.count)
            _ = embedded.withUnsafeMutableBytes { Hex.decode(form, from: 2 + keyDigits, into: $0) }
            guard embedded == salt else { return nil }
            return SecretBytes(count: SQLCipher3PageFormat.keySize) { _ = Hex.decode(form, from: 2, into: $0) }
        }
        return nil
    }

    /// SQLCipher's test: exactly `x'` + `hexDigits` hex digits + one more byte.
    private static func isRawKeyForm(_ form: UnsafeRawBufferPointer, hexDigits: Int) -> Bool {
        guard form.count == hexDigits + 3, form[0] | 0x20 == UInt8(ascii: "x"), form[1] == UInt8(ascii: "'") else { return false }
        return (2..<(2 + hexDigits)).allSatisfy { Hex.value(of: form[$0]) != nil }
    }
}
