import CipherFormats
import Foundation

/// A key-encryption key (KEK): a master key that wraps and unwraps databases' data keys, so that
/// the data keys are stored only as ciphertext and the master key can be rotated without touching
/// a database.
///
/// The library has three kinds: ``LocalKeyEncryptionKey`` (AES-256-GCM in this process, from a
/// passphrase, a raw key, a file, a variable or a systemd credential),
/// ``PKCS11KeyEncryptionKey`` (a key that never leaves a PKCS#11 token or HSM) and whatever an app
/// plugs in through this protocol: a cloud KMS, Vault's transit engine. An implementation
/// encrypts with authenticated encryption and binds ``KeyWrappingContext/associatedData``, so that
/// a wrapped value copied to another key entry, or made under another KEK, does not unwrap.
///
/// Both methods are synchronous: they run once per data key when a key list is built, before any
/// database is opened. An implementation that calls a network service blocks for that call (see
/// the Key Managers article for a Vault transit example).
///
/// ```swift
/// struct MyKMS: KeyEncryptionKey {
///     let id = "kms-2026"
///     func wrap(_ dataKey: DataKey, context: KeyWrappingContext) throws -> [UInt8] {
///         try dataKey.withUnsafeBytes { try kmsEncrypt(Array($0), aad: context.associatedData) }
///     }
///     func unwrap(_ wrapped: [UInt8], context: KeyWrappingContext) throws -> DataKey {
///         try DataKey(copying: kmsDecrypt(wrapped, aad: context.associatedData))
///     }
/// }
/// let keks = KeyEncryptionKeyList([MyKMS()])
/// let keys = try KeyList(database: "app.sqlite", keys: [
///     DatabaseKey(id: "data-2026", source: .wrapped(WrappedDataKey(text: stored, wrappedBy: "kms-2026"))),
/// ], keyEncryptionKeys: keks)
/// ```
public protocol KeyEncryptionKey: Sendable {
    /// The KEK's id: the name wrapped values give in `wrapped_by:`. Appears in logs and errors.
    var id: String { get }

    /// Encrypts `dataKey`, binding `context`; returns the bytes ``unwrap(_:context:)`` accepts.
    /// - Throws: Any error; the library reports it with the KEK's id and the data key's id.
    func wrap(_ dataKey: DataKey, context: KeyWrappingContext) throws -> [UInt8]

    /// Decrypts what ``wrap(_:context:)`` returned for the same `context`.
    /// - Throws: Any error when the value does not authenticate (another KEK made it, it was
    ///   altered, or it belongs to another key entry) or the key manager cannot be reached.
    func unwrap(_ wrapped: [UInt8], context: KeyWrappingContext) throws -> DataKey
}

/// What a wrapped data key is bound to: the data key's id and the KEK's id. An implementation of
/// ``KeyEncryptionKey`` authenticates ``associatedData`` (AES-GCM's additional data, a KMS's
/// encryption context), so a value moved to another key entry, or relabelled as made by another
/// KEK, is refused.
///
/// ```swift
/// let context = KeyWrappingContext(dataKeyID: "data-2026", keyEncryptionKeyID: "kek-2026")
/// context.associatedData   // "EncryptedSQLite wrapped data key v1", then both ids, length-prefixed
/// ```
public struct KeyWrappingContext: Sendable, Hashable {
    /// The id of the data key (the key entry's `id:`).
    public let dataKeyID: String
    /// The id of the KEK that wraps it (the entry's `wrapped_by:`).
    public let keyEncryptionKeyID: String

    /// The context of data key `dataKeyID` wrapped by `keyEncryptionKeyID`.
    public init(dataKeyID: String, keyEncryptionKeyID: String) {
        self.dataKeyID = dataKeyID
        self.keyEncryptionKeyID = keyEncryptionKeyID
    }

    /// The bytes to authenticate: a label naming this format and its version, then each id as a
    /// 4-byte big-endian length and its UTF-8 bytes (so no two pairs of ids give the same bytes).
    public var associatedData: [UInt8] {
        var bytes = Array("EncryptedSQLite wrapped data key v1".utf8)
        for id in [dataKeyID, keyEncryptionKeyID] {
            let utf8 = Array(id.utf8)
            withUnsafeBytes(of: UInt32(utf8.count).bigEndian) { bytes.append(contentsOf: $0) }
            bytes.append(contentsOf: utf8)
        }
        return bytes
    }
}
