import COpenSSLCrypto
import Foundation

/// The on-disk page format of one SQLCipher file, as SQLCipher's `crypto_impl.c` defines it for
/// every generation (SQLCipher 2.x, 3.x and 4.x differ only in the parameters held here):
///
/// - Page 1 starts with the file's random 16-byte salt; every other page starts with ciphertext.
/// - The last ``reserve`` bytes of every page hold a random 16-byte IV, the HMAC and random
///   padding: IV plus HMAC rounded up to the AES block size (3.x, HMAC-SHA1: 16 + 20 → 48; 4.x,
///   HMAC-SHA512: 16 + 64 → 80).
/// - The bytes in between (from offset 16 on page 1, from 0 on the others) are the same bytes of
///   the plaintext page, encrypted with AES-256-CBC under that IV, without padding.
/// - The HMAC (``hmac``) covers the ciphertext and the IV, then the page number as 4 bytes
///   (little-endian; big-endian on files SQLCipher 2.x wrote on big-endian hosts). Its key is
///   PBKDF2 with the KDF's digest of (encryption key, salt XOR ``hmacSaltMask``,
///   ``hmacKeyIterations``, 32 bytes).
/// - The encryption key is PBKDF2 with ``keyDerivation`` of (passphrase, salt, 32 bytes), or the
///   key itself when the key text is `x'<64 hex digits>'` (optionally followed by the salt's 32
///   hex digits, `x'<key><salt>'`).
///
/// A page that is all zeros is read by SQLCipher as a zero page whatever the key (SQLite reads
/// past the end of a file that way), so it stays all zeros.
package struct PageFormat: Sendable, Hashable, CustomStringConvertible {
    /// A digest SQLCipher uses for its KDF or its HMAC (the model's ``CipherDigest``).
    package typealias Digest = CipherDigest

    /// How a passphrase becomes the page key: PBKDF2-HMAC with `algorithm`, `iterations` times.
    package struct KeyDerivation: Sendable, Hashable {
        package var algorithm: Digest
        package var iterations: Int

        package init(algorithm: Digest, iterations: Int) {
            self.algorithm = algorithm
            self.iterations = iterations
        }
    }

    package static let saltSize = 16
    static let ivSize = 16
    static let keySize = 32
    static let blockSize = 16
    /// SQLite never uses the page that holds byte 0x40000000 of the file (its lock byte).
    static let lockByteOffset = 0x4000_0000

    /// The page size in bytes (a power of two from 512 to 65536).
    package var pageSize: Int
    /// The passphrase KDF (raw keys skip it).
    package var keyDerivation: KeyDerivation
    /// The pages' HMAC digest, `nil` when pages carry no HMAC (SQLCipher 1.x, `cipher_use_hmac = OFF`).
    package var hmac: Digest?
    /// Whether the page number the HMAC covers is big-endian (`cipher_hmac_pgno = be`, 2.x
    /// files from big-endian hosts) rather than little-endian.
    package var hmacPageNumberBigEndian = false
    /// XORed into the salt to derive the HMAC key (`cipher_hmac_salt_mask`; 0x00 on 2.0 beta files).
    package var hmacSaltMask: UInt8 = 0x3a
    /// PBKDF2 iterations that derive the HMAC key from the encryption key (`fast_kdf_iter`).
    package var hmacKeyIterations = 2
    /// Bytes at the start of page 1 left unencrypted (`cipher_plaintext_header_size`); then the
    /// salt is not in the file.
    package var plaintextHeaderSize = 0

    /// A format with every 2.x knob at its 3.x/4.x value.
    package init(pageSize: Int, keyDerivation: KeyDerivation, hmac: Digest?) {
        self.pageSize = pageSize
        self.keyDerivation = keyDerivation
        self.hmac = hmac
    }

    /// SQLCipher 3's defaults (PBKDF2-HMAC-SHA1 with 64,000 iterations, HMAC-SHA1) at `pageSize`.
    package static func sqlcipher3(pageSize: Int = 1024) -> PageFormat {
        PageFormat(pageSize: pageSize, keyDerivation: KeyDerivation(algorithm: .sha1, iterations: 64000), hmac: .sha1)
    }

    /// SQLCipher 4's defaults (PBKDF2-HMAC-SHA512 with 256,000 iterations, HMAC-SHA512) at `pageSize`.
    package static func sqlcipher4(pageSize: Int = 4096) -> PageFormat {
        PageFormat(pageSize: pageSize, keyDerivation: KeyDerivation(algorithm: .sha512, iterations: 256_000), hmac: .sha512)
    }

    /// The format of a file written with `settings` on `engine` (its defaults filling what the
    /// settings leave open); `nil` for settings the engine refuses or an engine of unknown version.
    /// The one mapping from ``CipherSettings`` to a page format.
    package init?(settings: CipherSettings, engine: SQLCipherEngine = .linked) {
        guard engine.major >= 3, engine.problem(with: settings) == nil else { return nil }
        self.init(format: settings.format(on: engine))
    }

    /// The page layout of a file in the resolved `format`.
    package init(format: CipherFormat) {
        self.init(pageSize: format.pageSize, keyDerivation: KeyDerivation(algorithm: format.kdfAlgorithm, iterations: format.kdfIterations),
                  hmac: format.useHMAC ? format.hmacAlgorithm : nil)
        hmacPageNumberBigEndian = format.hmacPageNumber == .bigEndian
        hmacSaltMask = format.hmacSaltMask
        hmacKeyIterations = format.fastKDFIterations
        plaintextHeaderSize = format.plaintextHeaderSize
    }

    /// The HMAC's size in bytes (0 without HMAC).
    var hmacSize: Int { hmac?.byteCount ?? 0 }

    /// The bytes at the end of each page that are not encrypted: IV, HMAC, padding.
    package var reserve: Int {
        let needed = Self.ivSize + hmacSize
        return (needed + Self.blockSize - 1) / Self.blockSize * Self.blockSize
    }

    /// Whether the library can re-encrypt this format's pages itself: pages must carry an HMAC
    /// (it proves each page was decrypted with the right key), and page 1 must hold the salt.
    package var supportsPageReencryption: Bool {
        hmac != nil && plaintextHeaderSize == 0 && pageSize >= 512 && pageSize <= 65536 && pageSize & (pageSize - 1) == 0
    }

    /// Where the encrypted bytes of page `number` start: after the salt on page 1.
    func encryptedStart(page number: UInt32) -> Int { number == 1 ? Self.saltSize : 0 }

    /// The page number of SQLite's lock-byte page, which holds no data and is never written.
    package var lockBytePage: UInt32 { UInt32(Self.lockByteOffset / pageSize + 1) }

    /// `4096-byte pages, PBKDF2-HMAC-SHA512 256000, HMAC-SHA512`, and the 2.x knobs when set.
    package var description: String {
        var parts = ["\(pageSize)-byte pages", "PBKDF2-HMAC-\(keyDerivation.algorithm.openSSLName) \(keyDerivation.iterations)",
                     hmac.map { "HMAC-\($0.openSSLName)" } ?? "no HMAC"]
        if hmacPageNumberBigEndian { parts.append("big-endian HMAC page numbers") }
        if hmacSaltMask != 0x3a { parts.append("HMAC salt mask \(hmacSaltMask)") }
        if hmacKeyIterations != 2 { parts.append("fast_kdf_iter \(hmacKeyIterations)") }
        if plaintextHeaderSize != 0 { parts.append("plaintext header \(plaintextHeaderSize)") }
        return parts.joined(separator: ", ")
    }
}

extension CipherDigest {
    /// OpenSSL's name for it (the `digest` parameter of `EVP_MAC_init`).
    var openSSLName: String {
        switch self {
        case .sha1: return "SHA1"
        case .sha256: return "SHA256"
        case .sha512: return "SHA512"
        }
    }

    /// OpenSSL's implementation, for `PKCS5_PBKDF2_HMAC`.
    var evp: OpaquePointer? {
        switch self {
        case .sha1: return EVP_sha1()
        case .sha256: return EVP_sha256()
        case .sha512: return EVP_sha512()
        }
    }
}
