import COpenSSLCrypto
import Foundation

/// Turns a key into the form that opens one particular file without a key derivation:
/// `x'<64 hex key><32 hex salt>'`, the raw key SQLCipher derives, plus the file's salt.
///
/// SQLCipher 3 derives the page key as PBKDF2-HMAC-SHA1(passphrase, salt, kdf_iter, 32 bytes),
/// with the salt stored in the file's first 16 bytes. Deriving it here once per file lets every
/// further connection (the reader pool) skip the ~30 ms derivation. The result is only used after
/// a connection keyed with it has read the schema, so a wrong derivation can never be used.
enum DerivedKey {
    /// The salt of an encrypted database: its first 16 bytes.
    /// Read through SQLite's file layer (``DatabaseFilePrefix``), never with a descriptor of our own.
    static func salt(ofFileAt path: String) -> [UInt8]? {
        guard case .success(let bytes) = DatabaseFilePrefix.read(path, count: 16), bytes.count == 16 else { return nil }
        return bytes
    }

    /// The raw key plus salt for `material` on a file with `salt`, or `nil` when it cannot be
    /// derived (then the caller keys with `material` itself).
    static func keySpec(for material: KeyMaterial, salt: [UInt8], kdfIterations: Int) -> KeyMaterial? {
        guard salt.count == 16, kdfIterations > 0 else { return nil }
        switch material.kind {
        case .rawKey:
            // x'<64 hex>' → x'<64 hex><32 hex salt>'
            return material.withSQLCipherBytes { form -> KeyMaterial? in
                guard form.count == 67 else { return nil }
                return build(keyHex: UnsafeRawBufferPointer(rebasing: form[2..<66]), salt: salt)
            }
        case .passphrase:
            let derived = SecretBytes(count: 32) { output in
                material.withSQLCipherBytes { passphrase in
                    salt.withUnsafeBufferPointer { saltBytes in
                        _ = PKCS5_PBKDF2_HMAC_SHA1(
                            passphrase.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(passphrase.count),
                            saltBytes.baseAddress, Int32(saltBytes.count), Int32(kdfIterations),
                            Int32(output.count), output.baseAddress?.assumingMemoryBound(to: UInt8.self))
                    }
                }
            }
            let hex = SecretBytes(count: 64) { buffer in
                derived.withUnsafeBytes { bytes in
                    for (index, byte) in bytes.enumerated() {
                        buffer[2 * index] = hexDigits[Int(byte >> 4)]
                        buffer[2 * index + 1] = hexDigits[Int(byte & 0x0F)]
                    }
                }
            }
            return hex.withUnsafeBytes { build(keyHex: $0, salt: salt) }
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    private static func build(keyHex: UnsafeRawBufferPointer, salt: [UInt8]) -> KeyMaterial {
        let form = SecretBytes(count: 99) { buffer in
            buffer[0] = UInt8(ascii: "x")
            buffer[1] = UInt8(ascii: "'")
            for index in 0..<64 { buffer[2 + index] = keyHex[index] }
            for (index, byte) in salt.enumerated() {
                buffer[66 + 2 * index] = hexDigits[Int(byte >> 4)]
                buffer[67 + 2 * index] = hexDigits[Int(byte & 0x0F)]
            }
            buffer[98] = UInt8(ascii: "'")
        }
        return KeyMaterial(kind: .rawKey, sqlcipherForm: form)
    }
}

/// The raw keys derived from one key material, by file salt and iteration count, so that each
/// PBKDF2 runs once per process per file. Thread-safe; holds key material, which never prints.
final class DerivationCache: @unchecked Sendable {
    private let lock = NSLock()
    // Invariant: only touched with `lock` held.
    private var entries: [[UInt8]: KeyMaterial] = [:]

    /// The cached value for `salt` and `iterations`, computing it with `derive` the first time.
    func value(salt: [UInt8], iterations: Int, derive: () -> KeyMaterial?) -> KeyMaterial? {
        let key = salt + withUnsafeBytes(of: UInt64(iterations).littleEndian) { Array($0) }
        if let cached = lock.withLock({ entries[key] }) { return cached }
        guard let derived = derive() else { return nil }
        lock.withLock { entries[key] = derived }
        return derived
    }
}
