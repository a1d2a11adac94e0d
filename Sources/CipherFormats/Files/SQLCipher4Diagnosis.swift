import _CryptoExtras
import Crypto
import DurableFiles
import Foundation

/// Tells whether a file the linked engine cannot open is a SQLCipher 4 database (default
/// settings) and which configured key is right for it, without decrypting anything.
///
/// SQLCipher 4's default format: the file's first 16 bytes are the salt; the encryption key is
/// PBKDF2-HMAC-SHA512(passphrase, salt, 256,000 iterations, 32 bytes) — or the raw key itself for
/// `x'…'` keys; the HMAC key is PBKDF2-HMAC-SHA512(encryption key, salt XOR 0x3a, 2 iterations,
/// 32 bytes); pages are 4096 bytes and end with a 16-byte IV and a 64-byte HMAC-SHA512 over the
/// page's ciphertext, its IV and the page number (4 bytes, little-endian). On page 1 the
/// authenticated region starts after the salt. A key whose HMAC matches page 1 is the right key.
///
/// This only runs after every key failed to open the file, so it costs nothing in normal use; each
/// passphrase costs one 256,000-round PBKDF2.
package struct SQLCipher4Diagnosis {
    let path: String

    /// A diagnosis of the file at `path`.
    package init(path: String) { self.path = path }

    static let pageSize = 4096
    static let saltSize = 16
    static let ivSize = 16
    static let hmacSize = 64
    static let kdfIterations = 256_000
    static let hmacKDFIterations = 2
    static let hmacSaltMask: UInt8 = 0x3a

    /// The id of the first key (in `keys`' order) that is right for this file under SQLCipher 4's
    /// defaults, or `nil` when the file does not look like one or no key matches.
    package func matchingKeyID(among keys: [(id: String, material: KeyMaterial?)]) -> String? {
        guard let page = firstPage() else { return nil }
        let salt = page[0..<Self.saltSize]
        let authenticated = page[Self.saltSize..<(Self.pageSize - Self.hmacSize)]
        let stored = page[(Self.pageSize - Self.hmacSize)...]
        for key in keys {
            guard let material = key.material, let encryptionKey = Self.encryptionKey(material, salt: salt) else { continue }
            let hmacSalt = salt.map { $0 ^ Self.hmacSaltMask }
            guard let hmacKey = try? encryptionKey.withUnsafeBytes({ bytes in
                try KDF.Insecure.PBKDF2.deriveKey(from: bytes, salt: hmacSalt, using: .sha512, outputByteCount: 32, unsafeUncheckedRounds: Self.hmacKDFIterations)
            }) else { continue }
            var hmac = HMAC<SHA512>(key: hmacKey)
            hmac.update(data: authenticated)
            hmac.update(data: [1, 0, 0, 0])  // page number 1, little-endian
            if Data(hmac.finalize()) == Data(stored) { return key.id }
        }
        return nil
    }

    /// Page 1, when the file's size fits SQLCipher 4's default page size.
    private func firstPage() -> [UInt8]? {
        guard let size = FileSystem.size(of: path), size >= Int64(Self.pageSize), size % Int64(Self.pageSize) == 0 else { return nil }
        // Through SQLite's file layer, like every read of a database file (DatabaseFilePrefix).
        guard case .success(let bytes) = DatabaseFilePrefix.read(path, count: Self.pageSize), bytes.count == Self.pageSize else { return nil }
        return bytes
    }

    /// The 32-byte encryption key SQLCipher 4 derives from `material` with this salt.
    private static func encryptionKey(_ material: KeyMaterial, salt: ArraySlice<UInt8>) -> SymmetricKey? {
        material.withSQLCipherBytes { bytes -> SymmetricKey? in
            switch material.kind {
            case .passphrase:
                return try? KDF.Insecure.PBKDF2.deriveKey(from: bytes, salt: salt, using: .sha512, outputByteCount: 32, rounds: kdfIterations)
            case .rawKey:
                // x'<64 hex digits>'
                guard bytes.count == 67 else { return nil }
                var raw = [UInt8](repeating: 0, count: 32)
                defer { raw.withUnsafeMutableBytes { explicit_bzero($0.baseAddress!, $0.count) } }
                guard raw.withUnsafeMutableBytes({ Hex.decode(bytes, from: 2, into: $0) }) else { return nil }
                return SymmetricKey(data: raw)
            }
        }
    }
}
