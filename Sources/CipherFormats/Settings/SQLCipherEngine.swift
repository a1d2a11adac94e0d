import Foundation
import SQLCipherConnection

/// The SQLCipher library this process is linked with, and everything that depends on its version.
///
/// This is the one place for version-specific behaviour:
///
/// - **Default format.** A key without cipher settings means the engine's own format: on
///   SQLCipher 3.x the 3.x format (PBKDF2-HMAC-SHA1 with 64,000 iterations, 1 KiB pages,
///   HMAC-SHA1), on SQLCipher 4 the 4.x format (PBKDF2-HMAC-SHA512 with 256,000 iterations,
///   4 KiB pages, HMAC-SHA512). ``defaultGeneration``.
/// - **Which settings it can apply.** SQLCipher 3.4.1 has no `cipher_compatibility`,
///   `cipher_kdf_algorithm`, `cipher_hmac_algorithm` or `cipher_plaintext_header_size` pragmas
///   (it ignores them silently), so it cannot read or write SHA-2 formats such as SQLCipher 4's.
///   SQLCipher 4 reads every generation; it still applies the deprecated 2.x pragmas
///   (`cipher_hmac_pgno`, `cipher_hmac_salt_mask`, `fast_kdf_iter`). ``problem(with:)``.
/// - **Which formats a key without settings may have written.** On SQLCipher 4, also the 3.x
///   format that SQLCipher 3 hosts wrote. ``formatsToTry(for:legacy:)``.
/// - **Logging.** SQLCipher 4 prints its own errors on standard error (three lines per key that
///   does not fit: `ERROR CORE sqlcipher_page_cipher: hmac check failed…`). It has no callback to
///   route them elsewhere (4.6.1 exports no `sqlcipher_set_log`), so the library sets
///   `PRAGMA cipher_log_level = NONE` once per process; key attempts and failures are reported
///   through the library's own logger and errors instead. This also applies to other SQLCipher
///   connections of the process.
/// - **Process-wide settings.** Both engines keep `cipher_hmac_salt_mask` for the whole process
///   (measured on 3.4.1 and 4.6.1; `cipher_hmac_pgno` and `fast_kdf_iter` are per connection).
///   The one format that needs another mask, SQLCipher 2.0 beta's, is only used when a key names
///   it explicitly, or for a `legacy` key when the library's page layer found page 1 written in
///   it with that key (``isBeta20File(at:material:)``). Such a connection is opened under
///   ``processWideSettings`` and the default is restored right after it derived its keys, but a
///   connection of the same process that derives its keys in that instant would use the beta mask
///   and fail to open (or, when it creates a file, write one no default setting opens): convert
///   2.0 beta files in a process of their own, such as one `rekey` run.
/// - **The SQLite underneath.** SQLCipher 3.4.1 carries SQLite 3.15.2; SQLCipher 4.6.1 carries
///   SQLite 3.46. ``sqliteVersion``; a statement that fails only because the SQLite is too old gets
///   an error that says so (`SQLiteFeature`).
///
/// ```swift
/// print("linked with SQLCipher \(SQLCipherEngine.linked.version), SQLite \(SQLCipherEngine.linked.sqliteVersion)")
/// ```
public struct SQLCipherEngine: Sendable, Equatable {
    /// The version as `PRAGMA cipher_version` reports it, e.g. `3.4.1` or `4.6.1 community`.
    public let version: String
    /// The major version (3 or 4), or 0 when the version could not be read.
    public let major: Int
    /// The version of the SQLite this SQLCipher is built on, e.g. `3.15.2`.
    public let sqliteVersion: String

    /// The engine linked into this process, detected once with `PRAGMA cipher_version`.
    public static let linked: SQLCipherEngine = detect()

    /// The generation whose format this engine writes when a key names no settings.
    public var defaultGeneration: CipherGeneration { major >= 4 ? .sqlcipher4 : .sqlcipher3 }

    /// `SQLCipher 4.6.1 community (SQLite 3.46.1)`.
    public var name: String { "SQLCipher \(version) (SQLite \(sqliteVersion))" }

    /// Whether `EncryptedDatabase.backup(to:)` copies with SQLite's online backup API: on 3.x
    /// only; on 4.x backups go through `sqlcipher_export` into an attached keyed file. (SQLCipher
    /// 4.1 "disabled the backup API for encrypted databases"; Zetetic supports it only between two
    /// encrypted databases with the same settings, which is what background rotation uses, and
    /// which its tests check on 4.6.1.)
    package var backsUpEncryptedDatabases: Bool { major == 3 }

    /// Why the linked engine cannot apply `settings`, or `nil` when it can.
    package func problem(with settings: CipherSettings) -> String? {
        if let problem = settings.problem() { return problem }
        guard major < 4 else { return nil }
        let needs4 = "; the linked SQLCipher \(version) cannot read or write such files (use a host linked with SQLCipher 4, or leave the setting out)"
        if settings.generation == .sqlcipher4 { return "\(CipherGeneration.sqlcipher4) (SQLCipher 4's format) needs SQLCipher 4" + needs4 }
        if let kdf = settings.kdfAlgorithm, kdf != .sha1 { return "kdf_algorithm \(kdf) needs SQLCipher 4" + needs4 }
        if let hmac = settings.hmacAlgorithm, hmac != .sha1 { return "hmac_algorithm \(hmac) needs SQLCipher 4" + needs4 }
        return nil
    }

    /// The formats a file opened with a key's `cipher` settings may have, cheapest and likeliest
    /// first: for a `legacy` key without settings, every SQLCipher 1.x/2.x variant this engine
    /// reads (``legacyVariants``); for settings that name a generation, exactly those; otherwise
    /// the settings on the engine's default generation, then (on SQLCipher 4) on the 3.x
    /// generation, which SQLCipher 3 hosts wrote with the same key list.
    package func formatsToTry(for cipher: CipherSettings, legacy: Bool) -> [CipherSettings] {
        if legacy && cipher.isEngineDefault { return Self.legacyVariants }
        if legacy || cipher.generation != nil || major < 4 { return [cipher] }
        let written3x = cipher.defaulting(to: .sqlcipher3)
        guard problem(with: written3x) == nil, written3x.format(on: self) != cipher.format(on: self) else { return [cipher] }
        return [cipher, written3x]
    }

    /// The SQLCipher 1.x and 2.x variants that both SQLCipher 3.4.1 and 4.6.1 read (checked on
    /// files the 3.4.1 shell wrote), in the order they are tried: 2.x (HMAC-SHA1, the common
    /// case), 1.x (no HMAC), 2.x from a big-endian host. PBKDF2 with 4,000 rounds costs little, so
    /// trying them in turn does too.
    ///
    /// SQLCipher 2.0 beta files are not in this list: they need another HMAC salt mask, which both
    /// engines keep for the whole process, so that trying it on every file would briefly change how
    /// every other connection of the process derives its keys. A legacy key tries ``beta20`` only
    /// after these, and only for a file whose page 1 the library's page layer authenticates in
    /// that format (``isBeta20File(at:material:)``); explicit settings open them too. Best in a
    /// process of their own (`rekey`).
    static let legacyVariants: [CipherSettings] = [
        CipherSettings(generation: .sqlcipher2),
        CipherSettings(generation: .sqlcipher1),
        CipherSettings(generation: .sqlcipher2, hmacPageNumber: .bigEndian),
    ]

    /// The settings of SQLCipher 2.0 beta files: 2.x with `fast_kdf_iter` 4000 and HMAC salt mask 0x00.
    package static let beta20 = CipherSettings(generation: .sqlcipher2, hmacSaltMask: 0x00, fastKDFIterations: 4000)

    /// The statements that apply `settings` to a connection (`schema` `nil`) or to an attached
    /// database, right after its key and before anything is read.
    func settingStatements(_ settings: CipherSettings, schema: String?) -> [String] {
        let prefix = schema.map { "\($0)." } ?? ""
        var statements: [String] = []
        var settings = settings
        if let generation = settings.generation {
            if major >= 4 {
                statements.append("PRAGMA \(prefix)cipher_compatibility = \(generation.rawValue)")
            } else {
                // SQLCipher 3 knows no compatibility pragma: its generations differ from its
                // defaults only in kdf_iter and HMAC (SHA-2 formats are refused by problem(with:)).
                let format = generation.format
                settings.kdfIterations = settings.kdfIterations ?? (format.kdfIterations == 64000 ? nil : format.kdfIterations)
                settings.useHMAC = settings.useHMAC ?? (format.useHMAC ? nil : false)
            }
        }
        if let kdf = settings.kdfIterations { statements.append("PRAGMA \(prefix)kdf_iter = \(kdf)") }
        if let size = settings.pageSize { statements.append("PRAGMA \(prefix)cipher_page_size = \(size)") }
        if let hmac = settings.useHMAC { statements.append("PRAGMA \(prefix)cipher_use_hmac = \(hmac ? "ON" : "OFF")") }
        if major >= 4 {
            if let kdf = settings.kdfAlgorithm { statements.append("PRAGMA \(prefix)cipher_kdf_algorithm = PBKDF2_HMAC_\(kdf.rawValue.uppercased())") }
            if let hmac = settings.hmacAlgorithm { statements.append("PRAGMA \(prefix)cipher_hmac_algorithm = HMAC_\(hmac.rawValue.uppercased())") }
            if let size = settings.plaintextHeaderSize { statements.append("PRAGMA \(prefix)cipher_plaintext_header_size = \(size)") }
        }
        if let order = settings.hmacPageNumber { statements.append("PRAGMA \(prefix)cipher_hmac_pgno = \(order.rawValue)") }
        if let mask = settings.hmacSaltMask { statements.append("PRAGMA \(prefix)cipher_hmac_salt_mask = \"x'\(Hex.byte(mask))'\"") }
        if let fast = settings.fastKDFIterations { statements.append("PRAGMA \(prefix)fast_kdf_iter = \(fast)") }
        return statements
    }

    /// What to say when a key is right for a file in SQLCipher 4's default format that the key's
    /// settings do not open: on SQLCipher 3, that this engine cannot read it and how to convert it
    /// where SQLCipher 4 runs (keeping user_version); on SQLCipher 4, that the key's settings name
    /// another format.
    package func sqlcipher4FileAdvice(keyID: String) -> String {
        if major >= 4 {
            return "key \"\(keyID)\" is correct for this file, which is in SQLCipher 4's default format, but the key's cipher settings name another format; remove its cipher: settings (or give it cipher: sqlcipher4)."
        }
        return "key \"\(keyID)\" is correct but this is a SQLCipher 4 file (SQLCipher 4's default format), which the linked SQLCipher \(version) cannot read. Convert it on a host linked with SQLCipher 4: open it with this library or `rekey` there, with a current key that has cipher: sqlcipher3 (the library then rewrites it through its verified export, keeping user_version, application_id and every row), and bring the file back."
    }

    /// What a "no key opens this file" message adds about formats this engine cannot read: on
    /// SQLCipher 3, files in SQLCipher 4's format; nothing on SQLCipher 4, which reads every
    /// generation.
    package var unreadableFormatsNote: String {
        major >= 4 ? "" : ", or it is in SQLCipher 4's format, which the linked SQLCipher \(version) cannot read"
    }

    /// Held while a connection runs with a process-wide setting other than the default (the HMAC
    /// salt mask of SQLCipher 2.0 beta files); see `Connection.init(path:access:create:key:cipher:busyTimeout:)`.
    static let processWideSettings = NSLock()

    /// Puts SQLCipher's process-wide HMAC salt mask back to its default (0x3a).
    static func restoreDefaultHMACSaltMask() {
        guard let keyed = try? Connection(path: ":memory:", access: .readWrite, create: true, sqlcipherKey: loggingProbeKey(), busyTimeout: .zero) else { return }
        defer { keyed.close() }
        try? keyed.execute("PRAGMA cipher_hmac_salt_mask = \"x'\(Hex.byte(CipherFormat.defaultHMACSaltMask))'\"")
    }

    private static func detect() -> SQLCipherEngine {
        let probe = try? Connection(path: ":memory:", access: .readWrite, create: true, sqlcipherKey: nil, busyTimeout: .zero)
        defer { probe?.close() }
        let version = (try? probe?.queryValue("PRAGMA cipher_version", as: String.self)) ?? nil
        let sqlite = (try? probe?.queryValue("SELECT sqlite_version()", as: String.self)) ?? nil
        let text = version ?? "unknown"
        let major = Int(text.prefix { $0.isNumber }) ?? 0
        if major >= 4 { silenceLogging() }
        return SQLCipherEngine(version: text, major: major, sqliteVersion: sqlite ?? "unknown")
    }

    /// Turns SQLCipher 4's own logging off for the process. The level must be set after the first
    /// keyed connection of the process: SQLCipher resets it when it first activates (measured on
    /// 4.6.1: a level set before any key is lost).
    private static func silenceLogging() {
        guard let keyed = try? Connection(path: ":memory:", access: .readWrite, create: true, sqlcipherKey: loggingProbeKey(), busyTimeout: .zero) else { return }
        defer { keyed.close() }
        try? keyed.execute("PRAGMA cipher_log_level = NONE")
    }

    /// A throwaway key (no secret) for the in-memory connection that changes SQLCipher's
    /// process-wide settings, with the engine's defaults.
    private static func loggingProbeKey() -> CipherKey? {
        (try? KeyMaterial.rawKey(hex: String(repeating: "0", count: 64))).map { CipherKey(probing: $0) }
    }
}
