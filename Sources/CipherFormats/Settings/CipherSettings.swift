/// The SQLCipher settings a file was (or is to be) written with, for one key.
///
/// Every field left `nil` means the linked engine's default (SQLCipher 3.4.1: `kdf_iter` 64000,
/// 1024-byte pages, HMAC on). Settings are applied per connection with `PRAGMA kdf_iter`,
/// `cipher_page_size` and `cipher_use_hmac` right after the key, never with the process-wide
/// `cipher_default_*` pragmas (they leak into every later connection).
///
/// A file opens only with the settings it was written with, so give an older key the settings of
/// the files it wrote. Rotating to a current key with different settings re-writes the file through
/// ``EncryptedDatabase``'s export path (an in-place rekey would keep the old settings).
///
/// ```swift
/// DatabaseKey(id: "2019", source: .passphrase("…"), cipher: CipherSettings(kdfIterations: 4000, useHMAC: false))
/// DatabaseKey(id: "2025", source: .hex("…"), cipher: CipherSettings(pageSize: 4096))
/// ```
public struct CipherSettings: Sendable, Hashable, Codable, CustomStringConvertible {
    /// PBKDF2 iterations for passphrases (`PRAGMA kdf_iter`); raw keys skip the KDF.
    public var kdfIterations: Int?
    /// The page size in bytes (`PRAGMA cipher_page_size`): a power of two from 512 to 65536.
    public var pageSize: Int?
    /// Whether pages carry an HMAC (`PRAGMA cipher_use_hmac`). SQLCipher 1.x files have none.
    public var useHMAC: Bool?

    /// Settings with the given overrides; `nil` keeps the engine's default.
    public init(kdfIterations: Int? = nil, pageSize: Int? = nil, useHMAC: Bool? = nil) {
        self.kdfIterations = kdfIterations
        self.pageSize = pageSize
        self.useHMAC = useHMAC
    }

    /// The engine's defaults.
    public static let engineDefault = CipherSettings()

    /// `true` when no setting is overridden.
    public var isEngineDefault: Bool { self == .engineDefault }

    /// The settings with every default filled in from the linked engine, so two settings can be
    /// compared for "would write the same file format".
    package var effective: CipherSettings {
        let defaults = SQLCipherEngine.linked.defaults
        return CipherSettings(
            kdfIterations: kdfIterations ?? defaults.kdfIterations,
            pageSize: pageSize ?? defaults.pageSize,
            useHMAC: useHMAC ?? defaults.useHMAC)
    }

    /// Checks the values SQLCipher accepts.
    package func problem() -> String? {
        if let kdfIterations, kdfIterations < 1 { return "kdf_iter must be at least 1" }
        // SQLCipher and OpenSSL take the iteration count as a 32-bit int.
        if let kdfIterations, kdfIterations > Int(Int32.max) { return "kdf_iter must be at most \(Int32.max)" }
        if let pageSize, pageSize < 512 || pageSize > 65536 || pageSize & (pageSize - 1) != 0 {
            return "page_size must be a power of two from 512 to 65536"
        }
        return nil
    }

    /// `kdf_iter 4000, page_size 1024, hmac off`, or `engine defaults`.
    public var description: String {
        var parts: [String] = []
        if let kdfIterations { parts.append("kdf_iter \(kdfIterations)") }
        if let pageSize { parts.append("page_size \(pageSize)") }
        if let useHMAC { parts.append("hmac \(useHMAC ? "on" : "off")") }
        return parts.isEmpty ? "engine defaults" : parts.joined(separator: ", ")
    }

    /// The settings SQLCipher 1.x and 2.x wrote (`kdf_iter` 4000, 1 KiB pages), with and without
    /// HMAC: the variants that `PRAGMA cipher_migrate` itself tries, in that order.
    package static let legacyVariants: [CipherSettings] = [
        CipherSettings(kdfIterations: 4000, pageSize: 1024, useHMAC: true),
        CipherSettings(kdfIterations: 4000, pageSize: 1024, useHMAC: false),
    ]
}
