/// The SQLCipher format a file was (or is to be) written with, for one key: a generation's
/// defaults, optionally with settings that differ from them.
///
/// Every field left `nil` takes the value of ``generation``; a `nil` generation means the linked
/// engine's own defaults (SQLCipher 3.4.1: the ``CipherGeneration/sqlcipher3`` format; SQLCipher
/// 4: ``CipherGeneration/sqlcipher4``). Settings are applied per connection right after the key
/// (see ``SQLCipherEngine``), never with the process-wide `cipher_default_*` pragmas (they leak
/// into every later connection). ``SQLCipherEngine/problem(with:)`` refuses settings the linked
/// engine cannot apply (SQLCipher 3.4.1 knows no SHA-2 KDF or HMAC and no plaintext header).
///
/// A file opens only with the format it was written with, so give an older key the settings of
/// the files it wrote. A key without a generation also opens the files other generations wrote
/// with the same overrides (on SQLCipher 4, the 3.x files that SQLCipher 3 hosts wrote), see
/// ``SQLCipherEngine/formatsToTry(for:legacy:)``. Rotating to a current key whose format differs
/// from the file's re-writes the file through ``EncryptedDatabase``'s verified export path (an
/// in-place rekey would keep the old format): that is how a 3.x file becomes a 4.x file.
///
/// ```swift
/// DatabaseKey(id: "2019", source: .passphrase("…"), cipher: CipherSettings(kdfIterations: 4000, useHMAC: false))
/// DatabaseKey(id: "2025", source: .hex("…"), cipher: CipherSettings(generation: .sqlcipher3))   // readable by SQLCipher 3 hosts
/// DatabaseKey(id: "2026", source: .env("KEY"), cipher: CipherSettings(generation: .sqlcipher4, kdfIterations: 500_000))
/// ```
public struct CipherSettings: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The generation whose defaults the other fields override (`cipher_compatibility`); `nil`
    /// means the linked engine's defaults.
    public var generation: CipherGeneration?
    /// PBKDF2 iterations for passphrases (`PRAGMA kdf_iter`); raw keys skip the KDF.
    public var kdfIterations: Int?
    /// The page size in bytes (`PRAGMA cipher_page_size`): a power of two from 512 to 65536.
    public var pageSize: Int?
    /// Whether pages carry an HMAC (`PRAGMA cipher_use_hmac`). SQLCipher 1.x files have none.
    public var useHMAC: Bool?
    /// The PBKDF2 hash (`PRAGMA cipher_kdf_algorithm`; SQLCipher 4 only, 3.x always uses SHA-1).
    public var kdfAlgorithm: CipherDigest?
    /// The page HMAC's hash (`PRAGMA cipher_hmac_algorithm`; SQLCipher 4 only, 3.x always uses SHA-1).
    public var hmacAlgorithm: CipherDigest?
    /// Bytes at the start of page 1 left unencrypted (`PRAGMA cipher_plaintext_header_size`;
    /// SQLCipher 4 only). Only 0 is accepted: such a file keeps its salt outside the file.
    public var plaintextHeaderSize: Int?
    /// The byte order of page numbers in the HMAC (`PRAGMA cipher_hmac_pgno`; SQLCipher 2.x files
    /// from big-endian hosts; deprecated in SQLCipher 4, which still reads them).
    public var hmacPageNumber: PageNumberByteOrder?
    /// The byte XOR-ed into the salt for the HMAC key (`PRAGMA cipher_hmac_salt_mask`, 0x3a by
    /// default; 0x00 in SQLCipher 2.0 beta files; deprecated in SQLCipher 4).
    public var hmacSaltMask: UInt8?
    /// PBKDF2 iterations of the HMAC key (`PRAGMA fast_kdf_iter`, 2 by default; 4000 in SQLCipher
    /// 2.0 beta files; deprecated in SQLCipher 4).
    public var fastKDFIterations: Int?

    /// Settings with the given overrides; `nil` keeps the generation's (or the engine's) default.
    public init(generation: CipherGeneration? = nil, kdfIterations: Int? = nil, pageSize: Int? = nil, useHMAC: Bool? = nil,
                kdfAlgorithm: CipherDigest? = nil, hmacAlgorithm: CipherDigest? = nil, plaintextHeaderSize: Int? = nil,
                hmacPageNumber: PageNumberByteOrder? = nil, hmacSaltMask: UInt8? = nil, fastKDFIterations: Int? = nil) {
        self.generation = generation
        self.kdfIterations = kdfIterations
        self.pageSize = pageSize
        self.useHMAC = useHMAC
        self.kdfAlgorithm = kdfAlgorithm
        self.hmacAlgorithm = hmacAlgorithm
        self.plaintextHeaderSize = plaintextHeaderSize
        self.hmacPageNumber = hmacPageNumber
        self.hmacSaltMask = hmacSaltMask
        self.fastKDFIterations = fastKDFIterations
    }

    /// The engine's defaults.
    public static let engineDefault = CipherSettings()

    /// `true` when no setting is given: the linked engine's own format.
    public var isEngineDefault: Bool { self == .engineDefault }

    /// The same settings on top of `generation` when they name none.
    func defaulting(to generation: CipherGeneration) -> CipherSettings {
        var settings = self
        settings.generation = self.generation ?? generation
        return settings
    }

    /// Every setting resolved on `engine`: the generation's defaults (the engine's when no
    /// generation is named) with this value's overrides.
    package func format(on engine: SQLCipherEngine = .linked) -> CipherFormat {
        var format = (generation ?? engine.defaultGeneration).format
        if let kdfIterations { format.kdfIterations = kdfIterations }
        if let pageSize { format.pageSize = pageSize }
        if let useHMAC { format.useHMAC = useHMAC }
        if let kdfAlgorithm { format.kdfAlgorithm = kdfAlgorithm }
        if let hmacAlgorithm { format.hmacAlgorithm = hmacAlgorithm }
        if let plaintextHeaderSize { format.plaintextHeaderSize = plaintextHeaderSize }
        if let hmacPageNumber { format.hmacPageNumber = hmacPageNumber }
        if let hmacSaltMask { format.hmacSaltMask = hmacSaltMask }
        if let fastKDFIterations { format.fastKDFIterations = fastKDFIterations }
        return format
    }

    /// The settings with every field filled in for the linked engine (``format(on:)``), so two
    /// settings can be compared for "would write the same file format".
    package var effective: CipherSettings {
        let format = format()
        return CipherSettings(
            kdfIterations: format.kdfIterations, pageSize: format.pageSize, useHMAC: format.useHMAC,
            kdfAlgorithm: format.kdfAlgorithm, hmacAlgorithm: format.hmacAlgorithm, plaintextHeaderSize: format.plaintextHeaderSize,
            hmacPageNumber: format.hmacPageNumber, hmacSaltMask: format.hmacSaltMask, fastKDFIterations: format.fastKDFIterations)
    }

    /// Checks the values any SQLCipher accepts (the linked engine's own limits are checked by
    /// ``SQLCipherEngine/problem(with:)``).
    package func problem() -> String? {
        if let kdfIterations, kdfIterations < 1 { return "kdf_iter must be at least 1" }
        // SQLCipher and OpenSSL take the iteration count as a 32-bit int.
        if let kdfIterations, kdfIterations > Int(Int32.max) { return "kdf_iter must be at most \(Int32.max)" }
        if let fastKDFIterations, fastKDFIterations < 1 || fastKDFIterations > Int(Int32.max) {
            return "fast_kdf_iter must be from 1 to \(Int32.max)"
        }
        if let pageSize, pageSize < 512 || pageSize > 65536 || pageSize & (pageSize - 1) != 0 {
            return "page_size must be a power of two from 512 to 65536"
        }
        if let plaintextHeaderSize, plaintextHeaderSize != 0 {
            // Such a file starts like an unencrypted database and does not hold its salt, which
            // must then be kept elsewhere (PRAGMA cipher_salt); the library does not handle that.
            return "plaintext_header_size must be 0: a file with a plaintext header keeps its salt outside the file, which this library does not support"
        }
        return nil
    }

    /// `sqlcipher3, kdf_iter 4000, hmac off`, or `engine defaults`.
    public var description: String {
        var parts: [String] = []
        if let generation { parts.append(generation.name) }
        if let kdfIterations { parts.append("kdf_iter \(kdfIterations)") }
        if let pageSize { parts.append("page_size \(pageSize)") }
        if let useHMAC { parts.append("hmac \(useHMAC ? "on" : "off")") }
        if let kdfAlgorithm { parts.append("kdf_algorithm \(kdfAlgorithm)") }
        if let hmacAlgorithm { parts.append("hmac_algorithm \(hmacAlgorithm)") }
        if let plaintextHeaderSize { parts.append("plaintext_header_size \(plaintextHeaderSize)") }
        if let hmacPageNumber { parts.append("hmac_pgno \(hmacPageNumber)") }
        if let hmacSaltMask { parts.append("hmac_salt_mask \(Hex.byte(hmacSaltMask))") }
        if let fastKDFIterations { parts.append("fast_kdf_iter \(fastKDFIterations)") }
        return parts.isEmpty ? "engine defaults" : parts.joined(separator: ", ")
    }
}
