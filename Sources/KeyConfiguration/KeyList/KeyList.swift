import CipherFormats
import Foundation

/// The ordered keys of one database, oldest first; the last one is the current key.
///
/// Building a key list resolves every source (environment variables, key files, hex text) and
/// checks the list, so that a misconfiguration shows up when the configuration is loaded, not on
/// the day an old key is needed. Keys with a `created` date must be listed oldest first: a list
/// that puts a newer key before an older one would rotate every file back to the older key, so it
/// is refused.
///
/// ```swift
/// let keys = try KeyList(database: "app.sqlite", keys: [
///     DatabaseKey(id: "2024-01", source: .passphrase("old passphrase")),
///     DatabaseKey(id: "2025-06", source: .environment(variable: "APP_DB_KEY", format: .hex)),
/// ])
/// ```
public struct KeyList: Sendable, CustomStringConvertible {
    /// The database this list belongs to, used in errors and logs.
    public let database: String
    /// The encrypted keys, oldest first (without the plaintext entry).
    let keys: [ResolvedKey]

    /// Resolves and checks `keys` for `database`.
    ///
    /// - Parameters:
    ///   - database: The database path or name, used in error messages.
    ///   - keys: The keys, oldest first; the last is the current key.
    ///   - environment: Where `environment` sources are looked up; `nil` (the default): the process
    ///     environment, read with `getenv` straight into a zeroed buffer (no `String` copy).
    /// - Throws: ``KeyConfigurationError`` for an empty list, an empty or duplicate id, keys whose
    ///   `created` dates are not oldest first
    ///   (``KeyConfigurationError/keysOutOfOrder(database:newerKeyID:newerCreated:olderKeyID:olderCreated:)``),
    ///   an unset environment variable, an unreadable or group/world-readable key file, or invalid
    ///   material.
    ///   - keyEncryptionKeys: The KEKs that `wrapped` sources name (see ``KeyEncryptionKeyList``).
    public init(database: String, keys: [DatabaseKey], environment: [String: String]? = nil, keyEncryptionKeys: KeyEncryptionKeyList = .empty) throws(KeyConfigurationError) {
        guard !keys.isEmpty else { throw .emptyKeyList(database: database) }
        try Self.checkCreationOrder(keys, database: database)
        var seen = Set<String>()
        var resolved: [ResolvedKey] = []
        var plaintextID: String?
        var hexLike: [String] = []
        for (index, key) in keys.enumerated() {
            // An id that starts with a visible ASCII character is not blank: no trimming needed.
            guard key.id.utf8.first.map({ $0 > 0x20 && $0 < 0x7F }) == true || !key.id.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw .emptyKeyID(database: database, position: index + 1)
            }
            guard seen.insert(key.id).inserted else { throw .duplicateKeyID(key.id, database: database) }
            if case .plaintext = key.source {
                guard index == 0, keys.count > 1 else { throw .plaintextEntryMisplaced(keyID: key.id, database: database) }
                plaintextID = key.id
                continue
            }
            if let problem = SQLCipherEngine.linked.problem(with: key.cipher) {
                throw .invalidCipherSettings(keyID: key.id, database: database, problem: problem)
            }
            if index == keys.count - 1, let mask = key.cipher.hmacSaltMask, mask != CipherFormat.defaultHMACSaltMask {
                throw .invalidCipherSettings(keyID: key.id, database: database, problem: "hmac_salt_mask is only for reading SQLCipher 2.0 beta files with an older key; the current key must write the default (3a)")
            }
            let material = try KeySourceResolver.resolve(key, database: database, environment: environment, keyEncryptionKeys: keyEncryptionKeys)
            let candidate = ResolvedKey(id: key.id, material: material, cipher: key.cipher, legacy: key.legacy, created: key.created)
            // The same material is allowed only with different settings (a settings-only rotation).
            if let twin = resolved.first(where: { $0.material!.isSameSecret(as: material) && $0.writesSameFormat(as: candidate) }) {
                throw .duplicateKeyMaterial(keyID: key.id, sameAs: twin.id, database: database)
            }
            resolved.append(candidate)
            if material.looksLikeHexKey, key.source.isReadAsPassphrase { hexLike.append(key.id) }
        }
        self.database = database
        self.keys = resolved
        self.plaintextKeyID = plaintextID
        self.hexLikePassphraseKeyIDs = hexLike
    }

    /// The ids of keys whose source is read as a passphrase (a `passphrase`, or an environment
    /// variable or key file without `format: hex`) but whose material is exactly 64 hex digits,
    /// as a raw key is written: when no key opens a file, the error names them.
    package let hexLikePassphraseKeyIDs: [String]

    /// Throws when a dated key is listed after a key created later (keys without a date are not
    /// compared), before any source is resolved.
    private static func checkCreationOrder(_ keys: [DatabaseKey], database: String) throws(KeyConfigurationError) {
        var newest: DatabaseKey?
        for key in keys {
            guard let created = key.created else { continue }
            if let earlier = newest, let earlierCreated = earlier.created, created < earlierCreated {
                throw .keysOutOfOrder(database: database, newerKeyID: earlier.id, newerCreated: earlierCreated, olderKeyID: key.id, olderCreated: created)
            }
            newest = key
        }
    }

    /// The id of the leading `plaintext` entry, when the list has one: unencrypted files are then
    /// encrypted to the current key when opened.
    public let plaintextKeyID: String?

    /// The key ids, oldest first (the plaintext entry, when present, first).
    public var ids: [String] { (plaintextKeyID.map { [$0] } ?? []) + keys.map(\.id) }

    /// The id of the current (last) key.
    public var currentID: String { current.id }

    package var current: ResolvedKey { keys[keys.count - 1] }

    /// The plaintext entry as a key without material.
    package var plaintextKey: ResolvedKey? { plaintextKeyID.map { ResolvedKey(id: $0, material: nil) } }

    /// `true` when a file opened with `key` (carrying the settings that opened it) is on the
    /// current key in the current key's format, so that it needs no rotation. A current key
    /// marked `legacy` has no single format: any of its variants counts.
    package func isCurrent(_ key: ResolvedKey) -> Bool {
        key.id == currentID && (current.legacy || key.cipher.format() == current.cipher.format())
    }

    /// The order in which keys are tried on a file: the current key first (the steady state after
    /// a rotation, so that an up-to-date file costs one key derivation), then the older keys from
    /// newest to oldest, so that a file `k` keys behind costs `k + 1` attempts however long the
    /// list grows (oldest first, a file one key behind cost as many attempts as the list has keys).
    package var trialOrder: [ResolvedKey] { [current] + keys.dropLast().reversed() }

    /// `KeyList(app.sqlite: 2024-01, 2025-06*)`; `*` marks the current key.
    public var description: String {
        "KeyList(\(database): " + ids.map { $0 == currentID ? "\($0)*" : $0 }.joined(separator: ", ") + ")"
    }
}
