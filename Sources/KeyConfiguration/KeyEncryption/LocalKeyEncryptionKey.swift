import CipherFormats
import DurableFiles
import Foundation

/// A key-encryption key held by this process: AES-256-GCM (the libcrypto SQLCipher links) with
/// a random 96-bit nonce per wrap, authenticating the ``KeyWrappingContext``. A wrapped value is
/// the nonce, the 32 encrypted bytes and the 16-byte tag (60 bytes).
///
/// Its 256-bit key comes from a raw key (hex, a binary or hex file, a variable, a systemd
/// credential) or from a passphrase through PBKDF2-HMAC-SHA512 with 256,000 rounds and the KEK's
/// own salt, run once per process for a passphrase and salt.
///
/// ```swift
/// let kek = try LocalKeyEncryptionKey(id: "kek-2026", passphrase: "a long passphrase", salt: salt)
/// let wrapped = try kek.wrap(DataKey.random(), context: KeyWrappingContext(dataKeyID: "data-2026", keyEncryptionKeyID: kek.id))
/// ```
public struct LocalKeyEncryptionKey: KeyEncryptionKey {
    /// The KEK's id.
    public let id: String
    /// The 256-bit key, in a buffer that is zeroed when released.
    private let key: SecretBytes

    /// PBKDF2 rounds for a passphrase KEK (SQLCipher 4's own default, with SHA-512).
    public static let passphraseRounds = 256_000
    /// The size of a passphrase KEK's salt in bytes.
    public static let saltSize = 16

    /// A KEK from a 256-bit raw key.
    public init(id: String, key: DataKey) {
        self.id = id
        self.key = key.bytes
    }

    /// A KEK derived from `passphrase` and `salt` (``saltSize`` bytes) with PBKDF2-HMAC-SHA512,
    /// ``passphraseRounds`` rounds.
    /// - Throws: ``KeyWrappingProblem/saltNeeded`` for a salt of another size.
    public init(id: String, passphrase: KeyText, salt: [UInt8]) throws(KeyWrappingProblem) {
        try self.init(id: id, passphraseBytes: passphrase.bytes, salt: salt)
    }

    package init(id: String, passphraseBytes: SecretBytes, salt: [UInt8]) throws(KeyWrappingProblem) {
        guard salt.count == Self.saltSize else { throw .saltNeeded }
        self.id = id
        // One PBKDF2 per passphrase and salt per process: a service that loads its Keys file again
        // (after a rotation made elsewhere) does not pay it again. Found by a SHA-256 of the salt
        // and the passphrase; the derived key it guards is in this process's memory anyway.
        let lookup = passphraseBytes.withUnsafeBytes { bytes in salt.withUnsafeBytes { SHA256Digest.of([$0, bytes]) } }
        if let lookup, let kept = Self.derivedKeys.withLock({ $0[lookup] }) {
            key = kept
            return
        }
        let derived = passphraseBytes.withUnsafeBytes { bytes in
            PBKDF2.derive(bytes, salt: salt, iterations: Self.passphraseRounds, digest: .sha512, byteCount: DataKey.byteCount)
        }
        guard let derived else { throw .unusableKeyEncryptionKey("PBKDF2 failed") }
        key = derived
        if let lookup { Self.derivedKeys.withLock { $0[lookup] = derived } }
    }

    /// Keys derived from passphrases in this process, by a hash of salt and passphrase.
    private static let derivedKeys = Locked<[[UInt8]: SecretBytes]>([:])

    /// Seals `dataKey` with a fresh random nonce.
    /// - Throws: ``KeyWrappingProblem/unusableKeyEncryptionKey(_:)`` when OpenSSL fails.
    public func wrap(_ dataKey: DataKey, context: KeyWrappingContext) throws -> [UInt8] {
        let sealed = dataKey.withUnsafeBytes { AES256GCM.seal($0, key: key, associatedData: context.associatedData) }
        guard let sealed else { throw KeyWrappingProblem.unusableKeyEncryptionKey("AES-256-GCM failed") }
        return sealed
    }

    /// Opens a value ``wrap(_:context:)`` made for the same context.
    /// - Throws: ``KeyWrappingProblem/wrappedValueSize(bytes:)`` or ``KeyWrappingProblem/doesNotAuthenticate``.
    public func unwrap(_ wrapped: [UInt8], context: KeyWrappingContext) throws -> DataKey {
        guard wrapped.count == AES256GCM.nonceSize + DataKey.byteCount + AES256GCM.tagSize else {
            throw KeyWrappingProblem.wrappedValueSize(bytes: wrapped.count)
        }
        guard let opened = AES256GCM.open(wrapped, key: key, associatedData: context.associatedData) else {
            throw KeyWrappingProblem.doesNotAuthenticate
        }
        return DataKey(bytes: opened)
    }
}
