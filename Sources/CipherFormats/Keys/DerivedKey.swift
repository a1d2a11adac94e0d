import Foundation

/// Turns a key into the form that opens one particular file without a key derivation:
/// `x'<64 hex key><32 hex salt>'`, the raw key SQLCipher derives, plus the file's salt.
///
/// SQLCipher derives the page key as PBKDF2(passphrase, salt, kdf_iter, 32 bytes) with the file
/// format's digest (``PageFormat/keyDerivation``: SHA-1 in 3.x, SHA-512 in 4.x), with the salt
/// stored in the file's first 16 bytes. Deriving it here once per file lets every
/// further connection (the reader pool) skip the derivation. The result is only used after
/// a connection keyed with it has read the schema, so a wrong derivation can never be used.
package enum DerivedKey {
    /// The salt of an encrypted database: its first 16 bytes.
    /// Read through SQLite's file layer (``DatabaseFilePrefix``), never with a descriptor of our own.
    package static func salt(ofFileAt path: String) -> [UInt8]? {
        guard case .success(let bytes) = DatabaseFilePrefix.read(path, count: 16), bytes.count == 16 else { return nil }
        return bytes
    }

    /// The raw key plus salt for `material` on a file with `salt`, or `nil` when it cannot be
    /// derived (then the caller keys with `material` itself). SQLCipher's own rule decides how the
    /// material is read (``PageKeys/derive(from:salt:format:)``): `x'<64 hex>'` is a raw key,
    /// anything else a passphrase run through `derivation`.
    static func keySpec(for material: KeyMaterial, salt: [UInt8], derivation: PageFormat.KeyDerivation) -> KeyMaterial? {
        PageKeys.encryptionKey(from: material, salt: salt, derivation: derivation).map { PageKeys.keySpec(key: $0, salt: salt) }
    }
}

/// The raw keys derived from one key material, by file salt and key derivation (digest and
/// iterations), so that each PBKDF2 runs once per process per file. Thread-safe; holds key material, which never prints.
package final class DerivationCache: @unchecked Sendable {
    private let lock = NSLock()
    // Invariant: only touched with `lock` held.
    private var entries: [Entry: KeyMaterial] = [:]

    private struct Entry: Hashable {
        let salt: [UInt8]
        let derivation: PageFormat.KeyDerivation
    }

    /// The cached value for `salt` and `derivation`, computing it with `derive` the first time.
    package func value(salt: [UInt8], derivation: PageFormat.KeyDerivation, derive: () -> KeyMaterial?) -> KeyMaterial? {
        let key = Entry(salt: salt, derivation: derivation)
        if let cached = lock.withLock({ entries[key] }) { return cached }
        guard let derived = derive() else { return nil }
        lock.withLock { entries[key] = derived }
        return derived
    }
}

extension KeyMaterial {
    /// Records the page keys derived from this material for a file's salt, so that connections
    /// opened on that file later key with them without another derivation.
    package func remember(_ keys: PageKeys, derivation: PageFormat.KeyDerivation) {
        _ = derivations.value(salt: keys.salt, derivation: derivation) { keys.keySpec }
    }
}
