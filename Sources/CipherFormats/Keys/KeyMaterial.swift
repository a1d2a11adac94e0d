import Foundation
import SQLCipherConnection

/// The secret part of a key, ready to hand to SQLCipher: either a passphrase (which SQLCipher runs
/// through PBKDF2 on every open) or a raw 256-bit key (which skips the KDF).
///
/// Key material never prints: `description`, `debugDescription` and `dump()` show only its kind.
/// Its bytes live in a buffer that is zeroed when the last copy of the material goes away.
///
/// ```swift
/// let material = try KeyMaterial.rawKey(hex: hexFromKeychain)
/// let key = DatabaseKey(id: "2025-06", source: .material(material))
/// ```
public struct KeyMaterial: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Which kind of key this is.
    ///
    /// ```swift
    /// let derivesKey = material.kind == .passphrase
    /// ```
    public enum Kind: String, Sendable, Codable {
        /// Text that SQLCipher derives the key from with PBKDF2 (64,000 iterations by default in 3.4.1).
        case passphrase
        /// 32 key bytes, passed to SQLCipher as `x'<64 hex digits>'`; no key derivation.
        case rawKey
    }

    /// Whether this is a passphrase or a raw key.
    public let kind: Kind
    /// The bytes exactly as given to `sqlite3_key`: the passphrase's UTF-8 bytes, or `x'…'` text.
    let sqlcipherForm: SecretBytes
    /// Raw keys derived from this material for particular files, shared by every copy.
    package let derivations = DerivationCache()

    init(kind: Kind, sqlcipherForm: SecretBytes) {
        self.kind = kind
        self.sqlcipherForm = sqlcipherForm
    }

    /// The raw key plus salt that this material gives for a file with `salt` and the format's
    /// `derivation`, derived at most once per material and file (see ``DerivedKey``).
    package func derived(forSalt salt: [UInt8], derivation: PageFormat.KeyDerivation) -> KeyMaterial? {
        derivations.value(salt: salt, derivation: derivation) {
            DerivedKey.keySpec(for: self, salt: salt, derivation: derivation)
        }
    }

    /// A passphrase, used byte for byte (UTF-8), including any spaces, quotes or non-ASCII text.
    /// - Throws: ``KeyMaterialProblem/empty`` for an empty passphrase (SQLCipher would silently
    ///   treat the database as unencrypted), ``KeyMaterialProblem/containsNUL(position:)`` for a
    ///   passphrase with a NUL character (no other SQLCipher tool could enter it),
    ///   ``KeyMaterialProblem/tooLong(bytes:limit:)`` beyond ``maximumPassphraseLength`` bytes.
    public static func passphrase(_ text: String) throws(KeyMaterialProblem) -> KeyMaterial {
        // Straight from the string's UTF-8 view into the zeroed buffer: no intermediate copy.
        try passphrase(bytes: text.utf8)
    }

    /// The longest passphrase accepted, in bytes: far more than any passphrase needs, and a bound
    /// on what a Keys file, variable or key file can make the process hold.
    public static let maximumPassphraseLength = 1024

    package static func passphrase(bytes: some Collection<UInt8>) throws(KeyMaterialProblem) -> KeyMaterial {
        guard !bytes.isEmpty else { throw .empty }
        guard bytes.count <= maximumPassphraseLength else { throw .tooLong(bytes: bytes.count, limit: maximumPassphraseLength) }
        if let offset = bytes.firstIndex(of: 0).map({ bytes.distance(from: bytes.startIndex, to: $0) }) {
            throw .containsNUL(position: offset + 1)
        }
        return KeyMaterial(kind: .passphrase, sqlcipherForm: SecretBytes(copying: bytes))
    }

    /// A raw 256-bit key written as exactly 64 hexadecimal digits (either case).
    /// - Throws: ``KeyMaterialProblem`` when the text is empty, not 64 digits long, or holds a
    ///   character that is not a hex digit (the character itself is never reported).
    public static func rawKey(hex: String) throws(KeyMaterialProblem) -> KeyMaterial {
        try rawKey(hexBytes: hex.utf8)
    }

    package static func rawKey(hexBytes: some Collection<UInt8>) throws(KeyMaterialProblem) -> KeyMaterial {
        // Contiguous digits (a `KeyText`'s buffer, a string's UTF-8) go through the specialized
        // path: the generic one costs ~50 µs for 64 digits, a tenth of an open.
        if let made = hexBytes.withContiguousStorageIfAvailable({ rawKey(hexBuffer: $0) }) { return try made.get() }
        guard !hexBytes.isEmpty else { throw .empty }
        guard hexBytes.count == 64 else { throw .wrongHexLength(digits: hexBytes.count) }
        for (offset, byte) in hexBytes.enumerated() where Hex.value(of: byte) == nil {
            throw .notHex(position: offset + 1)
        }
        // x'<64 hex>' — 67 bytes, built directly in the secret buffer.
        let form = SecretBytes(count: 67) { buffer in
            buffer[0] = UInt8(ascii: "x")
            buffer[1] = UInt8(ascii: "'")
            for (offset, byte) in hexBytes.enumerated() { buffer[2 + offset] = byte }
            buffer[66] = UInt8(ascii: "'")
        }
        return KeyMaterial(kind: .rawKey, sqlcipherForm: form)
    }

    /// ``rawKey(hexBytes:)`` for contiguous digits, the same checks in the same order.
    private static func rawKey(hexBuffer hexBytes: UnsafeBufferPointer<UInt8>) -> Result<KeyMaterial, KeyMaterialProblem> {
        guard !hexBytes.isEmpty else { return .failure(.empty) }
        guard hexBytes.count == 64 else { return .failure(.wrongHexLength(digits: hexBytes.count)) }
        for offset in 0..<64 where Hex.value(of: hexBytes[offset]) == nil {
            return .failure(.notHex(position: offset + 1))
        }
        let form = SecretBytes(count: 67) { buffer in
            buffer[0] = UInt8(ascii: "x")
            buffer[1] = UInt8(ascii: "'")
            for offset in 0..<64 { buffer[2 + offset] = hexBytes[offset] }
            buffer[66] = UInt8(ascii: "'")
        }
        return .success(KeyMaterial(kind: .rawKey, sqlcipherForm: form))
    }

    /// A raw 256-bit key from its 32 bytes.
    /// - Throws: ``KeyMaterialProblem/wrongByteCount(bytes:)`` unless there are exactly 32 bytes.
    public static func rawKey(bytes: some Collection<UInt8>) throws(KeyMaterialProblem) -> KeyMaterial {
        guard bytes.count == 32 else { throw .wrongByteCount(bytes: bytes.count) }
        let form = SecretBytes(count: 67) { buffer in
            buffer[0] = UInt8(ascii: "x")
            buffer[1] = UInt8(ascii: "'")
            for (offset, byte) in bytes.enumerated() { Hex.write(byte, into: buffer, at: 2 + 2 * offset) }
            buffer[66] = UInt8(ascii: "'")
        }
        return KeyMaterial(kind: .rawKey, sqlcipherForm: form)
    }

    /// Lends the bytes in the form `sqlite3_key` expects. Internal to the cipher layer: a
    /// connection is keyed with a ``CipherKey`` (these bytes and the file's settings), never with
    /// the bytes alone.
    func withSQLCipherBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try sqlcipherForm.withUnsafeBytes(body)
    }

    /// `true` for a passphrase that is exactly 64 hex digits (before one optional trailing
    /// newline): most likely a raw key that was read as a passphrase because its source lacks
    /// `format: hex`. Says nothing about the digits themselves.
    package var looksLikeHexKey: Bool {
        guard kind == .passphrase else { return false }
        return sqlcipherForm.withUnsafeBytes { bytes in
            var count = bytes.count
            if count > 0, bytes[count - 1] == UInt8(ascii: "\n") { count -= 1 }
            if count > 0, bytes[count - 1] == UInt8(ascii: "\r") { count -= 1 }
            return count == 64 && bytes.prefix(64).allSatisfy { Hex.value(of: $0) != nil }
        }
    }

    /// The secret as bytes: a passphrase's UTF-8 bytes, or a raw key's 32 bytes (decoded from
    /// its `x'…'` form), in a new zeroed buffer. For keys that are not handed to SQLCipher, such
    /// as a key-encryption key.
    package var secretBytes: SecretBytes {
        sqlcipherForm.withUnsafeBytes { form in
            switch kind {
            case .passphrase:
                return SecretBytes(copying: form)
            case .rawKey:
                return SecretBytes(count: 32) { buffer in
                    for index in 0..<32 {
                        let high = Hex.value(of: form[2 + 2 * index]) ?? 0, low = Hex.value(of: form[3 + 2 * index]) ?? 0
                        buffer[index] = high << 4 | low
                    }
                }
            }
        }
    }

    /// `true` when both are the same kind with the same bytes.
    package func isSameSecret(as other: KeyMaterial) -> Bool {
        kind == other.kind && sqlcipherForm.isEqual(to: other.sqlcipherForm)
    }

    /// `KeyMaterial(passphrase)` or `KeyMaterial(rawKey)`; never the secret.
    public var description: String { "KeyMaterial(\(kind.rawValue))" }
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// Shows the kind only, so `dump()` never prints the secret.
    public var customMirror: Mirror { Mirror(self, children: ["kind": kind]) }
}

/// Why some bytes are not usable key material. Never contains the bytes.
///
/// ```swift
/// do {
///     _ = try KeyMaterial.rawKey(hex: text)
/// } catch KeyMaterialProblem.wrongHexLength(let digits) {
///     print("a raw key has 64 hex digits, not \(digits)")
/// }
/// ```
public enum KeyMaterialProblem: Error, Sendable, Equatable, CustomStringConvertible {
    /// The key is empty; SQLCipher would treat the database as unencrypted.
    case empty
    /// A hex key must have exactly 64 hex digits.
    case wrongHexLength(digits: Int)
    /// The character at this 1-based position is not a hex digit.
    case notHex(position: Int)
    /// A binary key must have exactly 32 bytes.
    case wrongByteCount(bytes: Int)
    /// A passphrase holds a NUL character at this 1-based byte position. SQLCipher itself would take
    /// it, but no other tool (the `sqlcipher` shell, `PRAGMA key`) could enter it, and it usually
    /// means a binary or UTF-16 file was read as a passphrase.
    case containsNUL(position: Int)
    /// A passphrase longer than ``KeyMaterial/maximumPassphraseLength`` bytes.
    case tooLong(bytes: Int, limit: Int)

    /// What is wrong and what to do, without the key.
    public var description: String {
        switch self {
        case .empty:
            return "the key is empty (SQLCipher would leave the database unencrypted); give a passphrase or 64 hex digits"
        case .wrongHexLength(let digits):
            return "a hex key needs exactly 64 hex digits, this one has \(digits) characters; write all 64 digits, without x'' quotes or spaces"
        case .notHex(let position):
            return "character \(position) of the hex key is not a hex digit (0-9, a-f); write the key in hex, or use a passphrase source for text"
        case .wrongByteCount(let bytes):
            return "a binary key needs exactly 32 bytes, this one has \(bytes); write exactly 32 bytes, or use format hex or passphrase for a text file"
        case let .tooLong(bytes, limit):
            return "the passphrase has \(bytes) bytes, more than the \(limit) allowed; use a passphrase of at most \(limit) bytes (or a raw key: 64 hex digits)"
        case .containsNUL(let position):
            return "byte \(position) of the passphrase is a NUL character, which other SQLCipher tools cannot enter; for a binary key file use format binary (32 bytes), save text files as UTF-8"
        }
    }
}

extension KeyMaterialProblem: LocalizedError {
    /// The same text as ``description``, so that `localizedDescription` says what happened and what
    /// to do.
    public var errorDescription: String? { description }
}
