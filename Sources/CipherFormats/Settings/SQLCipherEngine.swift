import SQLCipherConnection

/// The SQLCipher library this process is linked with, and everything that depends on its version.
///
/// This is the one place for version-specific behaviour. The library is written for Debian's
/// SQLCipher 3.4.1 and also runs on SQLCipher 4: there, every keyed connection first sets
/// `PRAGMA cipher_compatibility = 3`, so that both engines read and write the same (3.x) file
/// format and a fleet can move between them. Files written with SQLCipher 4's own defaults
/// (PBKDF2-HMAC-SHA512 with 256,000 iterations, 4 KiB pages, HMAC-SHA512) cannot be read by 3.4.1
/// under any setting; when no key opens a file, the library checks whether one of the keys is
/// right for such a file and says so (``EncryptedDatabaseError``).
///
/// ```swift
/// print("linked with SQLCipher \(SQLCipherEngine.linked.version)")
/// ```
public struct SQLCipherEngine: Sendable, Equatable {
    /// The version as `PRAGMA cipher_version` reports it, e.g. `3.4.1` or `4.6.1 community`.
    public let version: String
    /// The major version (3 or 4), or 0 when the version could not be read.
    public let major: Int

    /// The engine linked into this process, detected once with `PRAGMA cipher_version`.
    public static let linked: SQLCipherEngine = detect()

    /// The settings a keyed connection uses when a key's ``CipherSettings`` leave them open: the
    /// 3.x format on every engine (SQLCipher 4 is pinned to it by ``connectionSetup``).
    var defaults: CipherSettings { CipherSettings(kdfIterations: 64000, pageSize: 1024, useHMAC: true) }

    /// Whether files this engine writes use SQLCipher 3's page layout (``SQLCipher3PageFormat``),
    /// so that the library can re-encrypt their pages itself: true from 3.x on (4.x and later
    /// are pinned to the 3.x format by ``connectionSetup``), false when the version is unknown.
    package var writesVersion3Pages: Bool { major >= 3 }

    /// Statements every keyed connection runs right after the key, before any setting or read.
    var connectionSetup: [String] {
        major >= 4 ? ["PRAGMA cipher_compatibility = 3"] : []
    }

    /// The same for an attached database `schema` (ATTACH … KEY).
    func attachedSetup(schema: String) -> [String] {
        major >= 4 ? ["PRAGMA \(schema).cipher_compatibility = 3"] : []
    }

    private static func detect() -> SQLCipherEngine {
        let version = (try? Connection(path: ":memory:", access: .readWrite, create: true, key: nil, busyTimeout: .zero)
            .queryValue("PRAGMA cipher_version", as: String.self)) ?? nil
        let text = version ?? "unknown"
        let major = Int(text.prefix { $0.isNumber }) ?? 0
        return SQLCipherEngine(version: text, major: major)
    }
}
