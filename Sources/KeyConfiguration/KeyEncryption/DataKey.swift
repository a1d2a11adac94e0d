import CipherFormats
import Foundation

/// A database's 256-bit data key in clear: what a ``KeyEncryptionKey`` wraps and unwraps. Its
/// bytes live in a buffer that is zeroed when the last copy goes away; it never prints.
///
/// SQLCipher uses a data key as a raw key (`x'<64 hex digits>'`), so opening a database with one
/// runs no key derivation.
///
/// ```swift
/// let dataKey = DataKey.random()
/// let wrapped = try kek.wrap(dataKey, context: KeyWrappingContext(dataKeyID: "data-2026", keyEncryptionKeyID: kek.id))
/// ```
public struct DataKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The size of a data key in bytes.
    public static let byteCount = 32

    package let bytes: SecretBytes

    package init(bytes: SecretBytes) {
        self.bytes = bytes
    }

    /// Copies 32 bytes.
    /// - Throws: ``KeyWrappingProblem/wrongDataKeySize(bytes:)`` for any other length.
    public init(copying bytes: some Collection<UInt8>) throws(KeyWrappingProblem) {
        guard bytes.count == Self.byteCount else { throw .wrongDataKeySize(bytes: bytes.count) }
        self.bytes = SecretBytes(copying: bytes)
    }

    /// 32 bytes from the system's random generator (`getrandom(2)` on Linux).
    public static func random() -> DataKey {
        var generator = SystemRandomNumberGenerator()
        return DataKey(bytes: SecretBytes(count: byteCount) { buffer in
            for offset in stride(from: 0, to: buffer.count, by: 8) {
                buffer.storeBytes(of: generator.next(), toByteOffset: offset, as: UInt64.self)
            }
        })
    }

    /// Lends the 32 bytes to `body`; do not keep them.
    public func withUnsafeBytes<Result, Failure: Error>(_ body: (UnsafeRawBufferPointer) throws(Failure) -> Result) throws(Failure) -> Result {
        try bytes.withUnsafeBytes(body)
    }

    /// The data key as SQLCipher key material (a raw key).
    package var material: KeyMaterial {
        // 32 bytes by construction, so rawKey(bytes:) cannot fail.
        bytes.withUnsafeBytes { raw in try! KeyMaterial.rawKey(bytes: raw) }
    }

    /// `DataKey(<secret>)`; never the bytes.
    public var description: String { "DataKey(<secret>)" }
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// Shows nothing of the key.
    public var customMirror: Mirror { Mirror(self, children: []) }
}
