import CipherFormats
import Foundation
@testable import KeyConfiguration
import Testing

/// The key-wrapping format against an independent implementation: a value Python's
/// `cryptography` (AES-256-GCM) sealed under a KEK that `hashlib.pbkdf2_hmac` derived opens here
/// to the same data key, so values written by earlier versions (swift-crypto) and by other tools
/// keep opening. Made with:
///
/// ```python
/// kek = hashlib.pbkdf2_hmac('sha512', b"vector passphrase", bytes(range(16)), 256000, 32)
/// aad = b"EncryptedSQLite wrapped data key v1" + b"\0\0\0\x09data-2026" + b"\0\0\0\x08kek-2026"
/// nonce = bytes(0xa0 + i for i in range(12))
/// sealed = nonce + AESGCM(kek).encrypt(nonce, bytes(range(32, 64)), aad)
/// ```
@Suite("Key wrapping: AES-256-GCM and PBKDF2-HMAC-SHA512 through libcrypto, checked against an independent implementation")
struct KeyWrappingVectorTests {
    static let sealed = "a0a1a2a3a4a5a6a7a8a9aaabda60f3610a3946a87933f9c1c67f7c19773065a62df877c812e8d420f6b8cf8a321b3bf0290759201378d80db7d42aa1"
    static let context = KeyWrappingContext(dataKeyID: "data-2026", keyEncryptionKeyID: "kek-2026")

    static func bytes(_ hex: String) -> [UInt8] {
        stride(from: 0, to: hex.count, by: 2).map { offset in
            let start = hex.index(hex.startIndex, offsetBy: offset)
            return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16)!
        }
    }

    static func kek() throws -> LocalKeyEncryptionKey {
        try LocalKeyEncryptionKey(id: "kek-2026", passphrase: KeyText("vector passphrase"), salt: Array(0..<16))
    }

    @Test("a value sealed elsewhere opens to the same data key; a changed byte, another context or another KEK does not open")
    func independentVector() throws {
        let kek = try Self.kek()
        let opened = try kek.unwrap(Self.bytes(Self.sealed), context: Self.context)
        #expect(opened.withUnsafeBytes { Array($0) } == Array(32..<64))

        for index in [0, 11, 12, 43, 44, 59] {  // nonce, ciphertext, tag
            var changed = Self.bytes(Self.sealed)
            changed[index] ^= 0x01
            #expect(throws: KeyWrappingProblem.doesNotAuthenticate) { try kek.unwrap(changed, context: Self.context) }
        }
        #expect(throws: KeyWrappingProblem.doesNotAuthenticate) {
            try kek.unwrap(Self.bytes(Self.sealed), context: KeyWrappingContext(dataKeyID: "data-2027", keyEncryptionKeyID: "kek-2026"))
        }
        let other = LocalKeyEncryptionKey(id: "kek-2026", key: DataKey.random())
        #expect(throws: KeyWrappingProblem.doesNotAuthenticate) { try other.unwrap(Self.bytes(Self.sealed), context: Self.context) }
        #expect(throws: KeyWrappingProblem.wrappedValueSize(bytes: 59)) { try kek.unwrap(Array(Self.bytes(Self.sealed).dropLast()), context: Self.context) }
    }

    @Test("the library's own wraps: 60 bytes, a fresh nonce each time, and they open to the data key")
    func roundTrip() throws {
        let kek = try Self.kek()
        let dataKey = DataKey.random()
        let first = try kek.wrap(dataKey, context: Self.context)
        let second = try kek.wrap(dataKey, context: Self.context)
        #expect(first.count == 60 && second.count == 60)
        #expect(first.prefix(12) != second.prefix(12))
        for wrapped in [first, second] {
            let opened = try kek.unwrap(wrapped, context: Self.context)
            #expect(opened.withUnsafeBytes { Array($0) } == dataKey.withUnsafeBytes { Array($0) })
        }
    }
}
