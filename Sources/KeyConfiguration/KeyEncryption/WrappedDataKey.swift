import Foundation

/// A data key stored as ciphertext: the bytes a ``KeyEncryptionKey`` made, and the id of that KEK.
///
/// In a Keys file it is a key entry's `wrapped_by:` (the KEK's id) and `wrapped_key:` (the bytes
/// in base64). Neither is secret: without the KEK the value reveals nothing, and it opens only as
/// the key entry it was made for (see ``KeyWrappingContext``).
///
/// ```swift
/// let wrapped = try WrappedDataKey(text: "q1Xv…", wrappedBy: "kek-2026")
/// DatabaseKey(id: "data-2026", source: .wrapped(wrapped))
/// ```
public struct WrappedDataKey: Sendable, Hashable, CustomStringConvertible {
    /// The id of the KEK that made ``bytes``.
    public let keyEncryptionKeyID: String
    /// What the KEK returned from ``KeyEncryptionKey/wrap(_:context:)``.
    public let bytes: [UInt8]

    /// The largest wrapped value accepted, in bytes: room for a KMS's ciphertext with its headers.
    public static let maximumSize = 4096

    /// A wrapped value from its bytes.
    public init(bytes: [UInt8], wrappedBy keyEncryptionKeyID: String) {
        self.bytes = bytes
        self.keyEncryptionKeyID = keyEncryptionKeyID
    }

    /// A wrapped value from its base64 text, as a Keys file writes it.
    /// - Throws: ``KeyWrappingProblem/notBase64`` or ``KeyWrappingProblem/wrappedValueSize(bytes:)``.
    public init(text: String, wrappedBy keyEncryptionKeyID: String) throws(KeyWrappingProblem) {
        // Blanks around the value are dropped; a value that starts and ends with an ASCII byte that
        // is neither a space nor a tab has none, and skips Foundation's trimming (a fleet's Keys
        // file holds one value per database).
        let utf8 = text.utf8
        let untrimmed = utf8.first.map { $0 < 0x80 && $0 != 0x20 && $0 != 0x09 } == true && utf8.last.map { $0 < 0x80 && $0 != 0x20 && $0 != 0x09 } == true
        guard let data = Data(base64Encoded: untrimmed ? text : text.trimmingCharacters(in: .whitespaces)) else { throw .notBase64 }
        guard !data.isEmpty, data.count <= Self.maximumSize else { throw .wrappedValueSize(bytes: data.count) }
        self.init(bytes: Array(data), wrappedBy: keyEncryptionKeyID)
    }

    /// The bytes in base64, as a Keys file writes them.
    public var text: String { Data(bytes).base64EncodedString() }

    /// `wrapped by kek-2026 (60 bytes)`: the KEK and the size, not the value.
    public var description: String { "wrapped by \(keyEncryptionKeyID) (\(bytes.count) bytes)" }
}

/// Why a data key could not be wrapped or unwrapped. Never holds key material.
///
/// ```swift
/// do { _ = try kek.unwrap(value, context: context) } catch KeyWrappingProblem.doesNotAuthenticate { … }
/// ```
public enum KeyWrappingProblem: Error, Sendable, Equatable, CustomStringConvertible {
    /// A data key must be exactly 32 bytes.
    case wrongDataKeySize(bytes: Int)
    /// A `wrapped_key:` value is not base64.
    case notBase64
    /// A wrapped value is empty, longer than ``WrappedDataKey/maximumSize``, or not the size this
    /// KEK makes.
    case wrappedValueSize(bytes: Int)
    /// The value does not authenticate under this KEK and context: another KEK made it, it was
    /// altered, or it was made for another key entry.
    case doesNotAuthenticate
    /// A passphrase KEK needs its `salt:` (16 random bytes as 32 hex digits).
    case saltNeeded
    /// The key-encryption key's own material is not usable (not 32 bytes, say).
    case unusableKeyEncryptionKey(String)
    /// The key manager failed (a KMS, an app's own KEK): its own words, without secrets.
    case keyManager(String)
    /// A PKCS#11 token failed: which step, and what to do.
    case pkcs11(PKCS11Problem)

    /// What went wrong, without key material.
    public var description: String {
        switch self {
        case .wrongDataKeySize(let bytes): return "a data key has 32 bytes, not \(bytes)"
        case .notBase64: return "the wrapped_key value is not base64 text"
        case .wrappedValueSize(let bytes): return "the wrapped value has \(bytes) bytes, which this key-encryption key never makes"
        case .doesNotAuthenticate:
            return "the wrapped value does not authenticate: it was made by another key-encryption key, altered, or copied from another key entry"
        case .saltNeeded: return "a passphrase key-encryption key needs salt: (32 hex digits, e.g. from `openssl rand -hex 16`), written once and never changed"
        case .unusableKeyEncryptionKey(let detail): return "the key-encryption key is not usable: \(detail)"
        case .keyManager(let detail): return detail
        case .pkcs11(let problem): return problem.description
        }
    }
}
