/// A SQLCipher generation: the set of defaults one major version writes, which later versions can
/// still read when told to (SQLCipher 4's `PRAGMA cipher_compatibility`).
///
/// ```swift
/// let pinned = CipherSettings(generation: .sqlcipher3)   // the format SQLCipher 3.x hosts read
/// ```
public enum CipherGeneration: Int, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// SQLCipher 1.x: PBKDF2-HMAC-SHA1 with 4,000 iterations, 1 KiB pages, no HMAC.
    case sqlcipher1 = 1
    /// SQLCipher 2.x: as 1.x with an HMAC-SHA1 on every page.
    case sqlcipher2 = 2
    /// SQLCipher 3.x: PBKDF2-HMAC-SHA1 with 64,000 iterations, 1 KiB pages, HMAC-SHA1.
    case sqlcipher3 = 3
    /// SQLCipher 4.x: PBKDF2-HMAC-SHA512 with 256,000 iterations, 4 KiB pages, HMAC-SHA512.
    case sqlcipher4 = 4

    /// The name used in the Keys file: `sqlcipher1` … `sqlcipher4`.
    public var name: String { "sqlcipher\(rawValue)" }

    /// The generation a Keys file names (`sqlcipher3`), or `nil`.
    public init?(name: String) {
        guard let generation = Self.allCases.first(where: { $0.name == name.lowercased() }) else { return nil }
        self = generation
    }

    /// `sqlcipher3`.
    public var description: String { name }

    /// Every setting as this generation writes it.
    package var format: CipherFormat {
        switch self {
        case .sqlcipher1, .sqlcipher2:
            return CipherFormat(kdfIterations: 4000, pageSize: 1024, kdfAlgorithm: .sha1, useHMAC: self == .sqlcipher2, hmacAlgorithm: .sha1)
        case .sqlcipher3:
            return CipherFormat(kdfIterations: 64000, pageSize: 1024, kdfAlgorithm: .sha1, useHMAC: true, hmacAlgorithm: .sha1)
        case .sqlcipher4:
            return CipherFormat(kdfIterations: 256_000, pageSize: 4096, kdfAlgorithm: .sha512, useHMAC: true, hmacAlgorithm: .sha512)
        }
    }
}

/// A hash function SQLCipher uses for its key derivation (PBKDF2-HMAC-…) or its page HMAC.
///
/// ```swift
/// let settings = CipherSettings(kdfAlgorithm: .sha256, hmacAlgorithm: .sha256)
/// ```
public enum CipherDigest: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// SHA-1 (SQLCipher 1.x–3.x).
    case sha1
    /// SHA-256.
    case sha256
    /// SHA-512 (SQLCipher 4's default).
    case sha512

    /// `sha512`.
    public var description: String { rawValue }

    /// The digest's output size in bytes (the size of a page's HMAC).
    package var byteCount: Int {
        switch self {
        case .sha1: return 20
        case .sha256: return 32
        case .sha512: return 64
        }
    }

    /// Roughly how much one PBKDF2 round costs, relative to SHA-1 (measured on x86-64 with OpenSSL;
    /// only used to try cheaper key derivations first).
    var relativeRoundCost: Double {
        switch self {
        case .sha1: return 1
        case .sha256: return 1.3
        case .sha512: return 2
        }
    }
}

/// How the page number is written into a page's HMAC (`PRAGMA cipher_hmac_pgno`): little-endian
/// everywhere except SQLCipher 2.x files written on big-endian hosts.
///
/// ```swift
/// let ppcFile = CipherSettings(generation: .sqlcipher2, hmacPageNumber: .bigEndian)
/// ```
public enum PageNumberByteOrder: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// Little-endian (`le`), the default of every SQLCipher version.
    case littleEndian = "le"
    /// Big-endian (`be`), as SQLCipher 2.x wrote on big-endian hosts.
    case bigEndian = "be"

    /// `le` or `be`.
    public var description: String { rawValue }
}

/// Every setting of a file's format, resolved: what a file written with some ``CipherSettings``
/// on the linked engine looks like. Two keys whose formats are equal write byte-compatible files,
/// so a rotation between them can rewrite pages in place; otherwise it goes through an export.
///
/// The page layer maps a format to the page layout it can rewrite itself (or declines).
package struct CipherFormat: Sendable, Hashable, CustomStringConvertible {
    /// PBKDF2 iterations for a passphrase (`kdf_iter`).
    package var kdfIterations: Int
    /// Bytes per page (`cipher_page_size`).
    package var pageSize: Int
    /// The PBKDF2 hash (`cipher_kdf_algorithm`); also the hash of the HMAC key's derivation.
    package var kdfAlgorithm: CipherDigest
    /// Whether pages carry an HMAC (`cipher_use_hmac`).
    package var useHMAC: Bool
    /// The page HMAC's hash (`cipher_hmac_algorithm`).
    package var hmacAlgorithm: CipherDigest
    /// Bytes at the start of page 1 left unencrypted (`cipher_plaintext_header_size`); 0 means the
    /// file starts with its salt.
    package var plaintextHeaderSize: Int = 0
    /// The byte order of the page number in the HMAC (`cipher_hmac_pgno`).
    package var hmacPageNumber: PageNumberByteOrder = .littleEndian
    /// The byte XOR-ed into the salt to derive the HMAC key's salt (`cipher_hmac_salt_mask`).
    package var hmacSaltMask: UInt8 = defaultHMACSaltMask
    /// PBKDF2 iterations of the HMAC key's derivation (`fast_kdf_iter`).
    package var fastKDFIterations: Int = 2

    /// SQLCipher's HMAC salt mask in every version (2.0 beta files used 0x00).
    package static let defaultHMACSaltMask: UInt8 = 0x3a

    /// Roughly what one key attempt with a passphrase costs, in SHA-1 PBKDF2 rounds (to try cheap
    /// formats first).
    package var passphraseCost: Double { Double(kdfIterations) * kdfAlgorithm.relativeRoundCost }

    /// `kdf_iter 256000 (sha512), page_size 4096, hmac sha512`.
    package var description: String {
        var text = "kdf_iter \(kdfIterations) (\(kdfAlgorithm)), page_size \(pageSize), hmac " + (useHMAC ? "\(hmacAlgorithm)" : "off")
        if plaintextHeaderSize != 0 { text += ", plaintext_header_size \(plaintextHeaderSize)" }
        if hmacPageNumber != .littleEndian { text += ", hmac_pgno \(hmacPageNumber)" }
        if hmacSaltMask != Self.defaultHMACSaltMask { text += ", hmac_salt_mask \(Hex.byte(hmacSaltMask))" }
        if fastKDFIterations != 2 { text += ", fast_kdf_iter \(fastKDFIterations)" }
        return text
    }
}
