import COpenSSLCrypto
import Foundation

/// The on-disk page format of SQLCipher 3 (what SQLCipher 3.x writes, and what SQLCipher 4 writes
/// with `cipher_compatibility = 3`), as SQLCipher's `crypto_impl.c` defines it:
///
/// - Page 1 starts with the file's random 16-byte salt; every other page starts with ciphertext.
/// - The last ``reserve`` bytes of every page hold a random 16-byte IV, the 20-byte HMAC-SHA1 and
///   random padding (36 bytes rounded up to the AES block size: 48).
/// - The bytes in between (from offset 16 on page 1, from 0 on the others) are the same bytes of
///   the plaintext page, encrypted with AES-256-CBC under that IV, without padding.
/// - The HMAC covers the ciphertext and the IV, then the page number as 4 little-endian bytes. Its
///   key is PBKDF2-HMAC-SHA1(encryption key, salt XOR 0x3a, 2 iterations, 32 bytes).
/// - The encryption key is PBKDF2-HMAC-SHA1(passphrase, salt, kdf_iter, 32 bytes), or the key
///   itself when the key text is `x'<64 hex digits>'` (optionally followed by the salt's 32 hex
///   digits, `x'<key><salt>'`).
///
/// A page that is all zeros is read by SQLCipher as a zero page whatever the key (SQLite reads
/// past the end of a file that way), so it stays all zeros.
package struct SQLCipher3PageFormat: Sendable, Equatable {
    package static let saltSize = 16
    static let ivSize = 16
    static let hmacSize = 20
    static let keySize = 32
    static let hmacSaltMask: UInt8 = 0x3a
    static let hmacKeyIterations = 2
    /// SQLite never uses the page that holds byte 0x40000000 of the file (its lock byte).
    static let lockByteOffset = 0x4000_0000

    /// The page size in bytes (a power of two from 512 to 65536).
    package let pageSize: Int
    /// The bytes at the end of each page that are not encrypted: IV, HMAC, padding.
    package let reserve = 48

    /// The format of a file with `settings` (engine defaults filled in), or `nil` when it is not
    /// this format (see ``init(format:)``).
    package init?(settings: CipherSettings) {
        self.init(format: settings.format())
    }

    /// The page layout of a file in `format`, or `nil` when it is not this layout (no HMAC, SHA-2,
    /// a plaintext header or one of the 2.x HMAC variants).
    package init?(format: CipherFormat) {
        guard format.useHMAC, format.hmacAlgorithm == .sha1, format.kdfAlgorithm == .sha1, format.plaintextHeaderSize == 0,
              format.hmacPageNumber == .littleEndian, format.hmacSaltMask == Self.hmacSaltMask,
              format.fastKDFIterations == Self.hmacKeyIterations,
              format.pageSize >= 512, format.pageSize <= 65536, format.pageSize & (format.pageSize - 1) == 0 else { return nil }
        self.pageSize = format.pageSize
    }

    /// Where the encrypted bytes of page `number` start: after the salt on page 1.
    func encryptedStart(page number: UInt32) -> Int { number == 1 ? Self.saltSize : 0 }

    /// The page number of SQLite's lock-byte page, which holds no data and is never written.
    package var lockBytePage: UInt32 { UInt32(Self.lockByteOffset / pageSize + 1) }
}
