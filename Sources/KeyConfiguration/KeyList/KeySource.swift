import CipherFormats
import Foundation

/// How the bytes of a key file or environment variable are to be read.
///
/// ```swift
/// KeySource.environment(variable: "APP_DB_KEY", format: .hex)
/// ```
public enum KeyFormat: String, Sendable, Codable, CaseIterable {
    /// The text is a passphrase (SQLCipher runs PBKDF2 over it).
    case passphrase
    /// The text is exactly 64 hex digits of a raw key.
    case hex
    /// The file holds exactly 32 raw key bytes (key files only).
    case binary
}

/// Where a key's material comes from.
///
/// A source is resolved when a ``KeyList`` is built: environment variables are read, key files are
/// checked and read, text is validated. Its `description` names the source (e.g.
/// `env APP_DB_KEY`, `file /etc/app/db.key`) and never the secret. Passphrase and hex text is
/// held in a ``KeyText`` (a zeroed buffer), never in a `String`.
///
/// ```swift
/// DatabaseKey(id: "2025-06", source: .file(path: "/etc/app/db.key", format: .binary))
/// ```
public enum KeySource: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// A passphrase given in configuration.
    case passphrase(KeyText)
    /// A raw key given as 64 hex digits.
    case hex(KeyText)
    /// The value of an environment variable, read as `format`.
    case environment(variable: String, format: KeyFormat = .passphrase)
    /// The contents of a file, read as `format`. A trailing newline is ignored for `passphrase`
    /// and `hex`. The file must not be readable or writable by group or others.
    case file(path: String, format: KeyFormat = .passphrase)
    /// A systemd credential: the file `name` in `$CREDENTIALS_DIRECTORY` (what `LoadCredential=`
    /// and `LoadCredentialEncrypted=` give a service), read as `format` under the key-file rules.
    case credential(name: String, format: KeyFormat = .passphrase)
    /// A data key stored wrapped by a key-encryption key (see ``KeyEncryptionKeyList``): unwrapped
    /// when the key list is built, then used as a raw key (no key derivation).
    case wrapped(WrappedDataKey)
    /// Material you already hold.
    case material(KeyMaterial)
    /// No key: the database is an unencrypted SQLite file. Allowed only as the first (oldest)
    /// entry of a key list, so that opening encrypts such a file to the current key.
    case plaintext

    /// A passphrase given as a `String` (copied into a ``KeyText``; the `String` stays yours).
    @_disfavoredOverload
    public static func passphrase(_ text: String) -> KeySource { .passphrase(KeyText(text)) }

    /// A raw key given as 64 hex digits in a `String` (copied into a ``KeyText``).
    @_disfavoredOverload
    public static func hex(_ digits: String) -> KeySource { .hex(KeyText(digits)) }

    /// A short, secret-free name of the source.
    public var description: String {
        switch self {
        case .passphrase: return "passphrase"
        case .hex: return "hex"
        case let .environment(variable, format):
            // A name not in UPPER_CASE may be a key written under env: by mistake (see KeyConfigurationError).
            let shown = KeyConfigurationError.shownVariableName(variable) == variable ? variable : "(name not shown)"
            return "env \(shown) (\(format.rawValue))"
        case let .file(path, format): return "file \(path) (\(format.rawValue))"
        case let .credential(name, format): return "credential \(name) (\(format.rawValue))"
        case .wrapped(let value): return value.description
        case .material(let material): return "material (\(material.kind.rawValue))"
        case .plaintext: return "plaintext (no encryption)"
        }
    }

    /// Same as ``description``.
    public var debugDescription: String { description }
    /// Shows the description only, so `dump()` never prints the secret.
    public var customMirror: Mirror { Mirror(self, children: ["source": description]) }

    /// `true` when the source's text becomes a passphrase: a `passphrase`, or an environment
    /// variable or key file with format `passphrase`.
    var isReadAsPassphrase: Bool {
        switch self {
        case .passphrase, .environment(_, .passphrase), .file(_, .passphrase), .credential(_, .passphrase): return true
        default: return false
        }
    }
}

/// One key of a database's key list: a label that may appear in logs and errors, where its
/// material comes from, and optionally the day it was created.
///
/// ```swift
/// DatabaseKey(id: "2025-06", source: .environment(variable: "APP_DB_KEY", format: .hex))
///
/// // With its creation date, a list in the wrong order is refused (see `KeyList`).
/// let june = ISO8601DateFormatter().date(from: "2025-06-01T00:00:00Z")
/// DatabaseKey(id: "2025-06", source: .environment(variable: "APP_DB_KEY", format: .hex), created: june)
/// ```
public struct DatabaseKey: Sendable, CustomStringConvertible, CustomReflectable {
    /// The key's label, such as `2025-06`. Shown in logs, errors and reports; never secret.
    public let id: String
    /// Where the material comes from.
    public let source: KeySource
    /// The cipher settings of the files this key wrote (or, for the current key, will write).
    public let cipher: CipherSettings
    /// `true` for files written by SQLCipher 1.x or 2.x (`kdf_iter` 4000, with or without HMAC):
    /// the key is tried with those settings, and a file it opens is upgraded to the current key
    /// and settings through the verified export path.
    public let legacy: Bool
    /// When the key was created, if known. A ``KeyList`` whose dated keys are not oldest first is
    /// refused, and rotating a file to a key older than the one it is on is logged as a warning.
    public let created: Date?

    /// A key with a label, a source, and optionally the cipher settings of its files and the day
    /// it was created (`nil`: not known, and not checked).
    public init(id: String, source: KeySource, cipher: CipherSettings = .engineDefault, legacy: Bool = false, created: Date? = nil) {
        self.id = id
        self.source = source
        self.cipher = cipher
        self.legacy = legacy
        self.created = created
    }

    /// The entry for unencrypted files (the oldest entry of a key list only).
    public static func plaintext(id: String) -> DatabaseKey {
        DatabaseKey(id: id, source: .plaintext)
    }

    /// `DatabaseKey(id: "…", source: …)` without the secret.
    public var description: String {
        var text = "DatabaseKey(id: \(id.debugDescription), source: \(source)"
        if !cipher.isEngineDefault { text += ", cipher: \(cipher)" }
        if legacy { text += ", legacy" }
        if let created { text += ", created: \(KeyCreationDate.text(of: created))" }
        return text + ")"
    }
    /// Shows the id and source name only.
    public var customMirror: Mirror { Mirror(self, children: ["id": id, "source": source.description]) }
}

/// A key whose source has been resolved: its id, and its material together with the settings of
/// the files it opens (a ``CipherKey``, the only value a connection can be keyed with).
///
/// Every kind of key ends here: a passphrase, a raw key, a key file or variable, and any kind
/// added later (a data key unwrapped with a key-encryption key) resolves to material, and opens
/// files only through ``cipherKey``.
package struct ResolvedKey: Sendable {
    package let id: String
    /// The material and the settings of the files it opens; `nil` for the plaintext entry.
    package let cipherKey: CipherKey?
    package let legacy: Bool
    /// When the key was created, if known.
    package let created: Date?

    package init(id: String, material: KeyMaterial?, cipher: CipherSettings = .engineDefault, legacy: Bool = false, created: Date? = nil) {
        self.init(id: id, cipherKey: material.map { CipherKey(material: $0, settings: cipher) }, legacy: legacy, created: created)
    }

    package init(id: String, cipherKey: CipherKey?, legacy: Bool = false, created: Date? = nil) {
        self.id = id
        self.cipherKey = cipherKey
        self.legacy = legacy
        self.created = created
    }

    /// The secret; `nil` for the plaintext entry.
    package var material: KeyMaterial? { cipherKey?.material }
    /// The settings of the files this key opens (the engine's defaults for the plaintext entry).
    package var cipher: CipherSettings { cipherKey?.settings ?? .engineDefault }

    /// `true` when a file written with `self` and with `other` would have the same format
    /// (every setting resolved on the linked engine; legacy keys never match).
    package func writesSameFormat(as other: ResolvedKey) -> Bool {
        !legacy && !other.legacy && cipher.format() == other.cipher.format()
    }

    /// `true` for the plaintext entry.
    package var isPlaintext: Bool { material == nil }

    /// The settings to try when opening a file with this key, the key's own format first: the
    /// legacy variants for a legacy key (unless settings were given); for settings without a
    /// generation, also the other generations the linked engine reads that such a key may have
    /// written; else exactly the configured settings (``SQLCipherEngine/formatsToTry(for:legacy:)``).
    package var settingsToTry: [CipherSettings] {
        SQLCipherEngine.linked.formatsToTry(for: cipher, legacy: legacy)
    }

    /// This key with the settings that opened a file.
    package func with(_ settings: CipherSettings) -> ResolvedKey {
        ResolvedKey(id: id, material: material, cipher: settings, legacy: legacy, created: created)
    }

    /// This key with `material` in place of its own (a raw key derived from it for one file),
    /// keeping its settings. The plaintext entry has no material to replace.
    package func with(_ material: KeyMaterial) -> ResolvedKey {
        guard let cipherKey else { preconditionFailure("the plaintext entry has no key material to replace") }
        return ResolvedKey(id: id, cipherKey: cipherKey.with(material), legacy: legacy, created: created)
    }
}
