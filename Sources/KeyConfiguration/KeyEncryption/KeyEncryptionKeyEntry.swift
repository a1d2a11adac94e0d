import CipherFormats
import Foundation

/// Where a key-encryption key comes from.
///
/// ```swift
/// KeyEncryptionKeySource.local(.file(path: "/etc/app/kek-2026.key", format: .binary))
/// KeyEncryptionKeySource.local(.passphrase("a long passphrase"), salt: salt)
/// KeyEncryptionKeySource.pkcs11(PKCS11KeyReference(module: "/usr/lib/softhsm/libsofthsm2.so",
///     tokenLabel: "app", keyLabel: "kek-2026", pin: .environment("APP_HSM_PIN")))
/// ```
public enum KeyEncryptionKeySource: Sendable, CustomStringConvertible {
    /// A ``LocalKeyEncryptionKey`` whose material comes from a key source (`passphrase`, `hex`,
    /// `env`, `file` or `credential`). A passphrase needs `salt` (16 bytes).
    case local(KeySource, salt: [UInt8]? = nil)
    /// A ``PKCS11KeyEncryptionKey``: a key that stays in a PKCS#11 token.
    case pkcs11(PKCS11KeyReference)
    /// A KEK the app built (a KMS, Vault transit), given to ``KeysFile/load(path:externalKeyEncryptionKeys:)``
    /// under the name the Keys file's `external:` field gives.
    case external(name: String)

    /// A secret-free name of the source.
    public var description: String {
        switch self {
        case let .local(source, salt): return salt == nil ? source.description : "\(source.description), salted"
        case .pkcs11(let reference): return reference.description
        case .external(let name): return "external \(name)"
        }
    }
}

/// One key-encryption key of a Keys file's `key_encryption_keys:` list: its id, its source and
/// optionally the day it was made.
///
/// ```swift
/// KeyEncryptionKeyEntry(id: "kek-2026", source: .local(.environment(variable: "APP_KEK", format: .hex)))
/// ```
public struct KeyEncryptionKeyEntry: Sendable, CustomStringConvertible {
    /// The KEK's id, which wrapped values name in `wrapped_by:`.
    public let id: String
    /// Where the KEK comes from.
    public let source: KeyEncryptionKeySource
    /// When it was made, if known.
    public let created: Date?

    /// A KEK entry.
    public init(id: String, source: KeyEncryptionKeySource, created: Date? = nil) {
        self.id = id
        self.source = source
        self.created = created
    }

    /// The label key sources are reported under for a KEK, in the place of a database's path.
    static let listName = "key_encryption_keys"

    /// The KEK, its source read (and a passphrase derived, a token logged in to).
    /// - Throws: the errors of a key source, named with the KEK's id, or
    ///   ``KeyConfigurationError/keyEncryptionKeyUnavailable(keyEncryptionKeyID:source:problem:)``.
    func resolve(environment: [String: String]?, external: [String: any KeyEncryptionKey]) throws(KeyConfigurationError) -> any KeyEncryptionKey {
        func unavailable(_ problem: KeyWrappingProblem) -> KeyConfigurationError {
            .keyEncryptionKeyUnavailable(keyEncryptionKeyID: id, source: source.description, problem: problem)
        }
        switch source {
        case let .local(keySource, salt):
            if case .plaintext = keySource { throw unavailable(.unusableKeyEncryptionKey("plaintext is not a key")) }
            if case .wrapped = keySource { throw unavailable(.unusableKeyEncryptionKey("a key-encryption key is not itself wrapped")) }
            let material = try KeySourceResolver.resolve(DatabaseKey(id: id, source: keySource), database: Self.listName, environment: environment, keyEncryptionKeys: .empty)
            do throws(KeyWrappingProblem) {
                switch material.kind {
                case .passphrase:
                    guard let salt else { throw .saltNeeded }
                    return try LocalKeyEncryptionKey(id: id, passphraseBytes: material.secretBytes, salt: salt)
                case .rawKey:
                    return LocalKeyEncryptionKey(id: id, key: DataKey(bytes: material.secretBytes))
                }
            } catch {
                throw unavailable(error)
            }
        case .pkcs11(let reference):
            do throws(KeyWrappingProblem) {
                return try PKCS11KeyEncryptionKey(id: id, reference: reference, environment: environment)
            } catch {
                throw unavailable(error)
            }
        case .external(let name):
            guard let key = external[name] else {
                throw unavailable(.keyManager("no external key-encryption key named \"\(name)\" was given to the key list (the app registers it: keyList(forDatabase:externalKeyEncryptionKeys:))"))
            }
            return key
        }
    }

    /// `KeyEncryptionKeyEntry(id: "kek-2026", source: …)`, without secrets.
    public var description: String {
        "KeyEncryptionKeyEntry(id: \(id.debugDescription), source: \(source)" + (created.map { ", created: \(KeyCreationDate.text(of: $0))" } ?? "") + ")"
    }
}

extension KeyEncryptionKeyList {
    /// The KEKs `entries` describe, oldest first, each resolved on its first use. `external`
    /// supplies the KEKs of `external:` entries by name.
    public init(entries: [KeyEncryptionKeyEntry], external: [String: any KeyEncryptionKey] = [:]) {
        self.init(slots: entries.map { entry in
            Slot(id: entry.id, source: entry.source.description) { (environment) throws(KeyConfigurationError) in
                try entry.resolve(environment: environment, external: external)
            }
        })
    }
}
