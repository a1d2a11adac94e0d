import COpenSSLCrypto
import Foundation

/// The on-disk page format of SQLCipher 3 (what SQLCipher 3.x writes, and what SQLCipher 4 writes
/// with `cipher_compatibility = 3`), as SQLCipher's `crypto_impl.c` defines it:
///
/// - Page 1 starts with the file's random 16-byte salt; every other page starts with ciphertext.
/// - The last ``reserve`` bytes of every page hold a random 16-byte IV, the 20-byte HMAC-SHA1 and
///   random padding (36 bytes rounded up to the AES block size: 48).
/// - The bytes in between (from offset 16 on page 1, from 0 on the others) are the same bytes of
///   the plaintext page, encrypted with AES-256-CBC under that IV, without padding.
/// - The HMAC covers the ciphertext and the IV, then the page number as 4 little-endian bytes. Its
///   key is PBKDF2-HMAC-SHA1(encryption key, salt XOR 0x3a, 2 iterations, 32 bytes).
/// - The encryption key is PBKDF2-HMAC-SHA1(passphrase, salt, kdf_iter, 32 bytes), or the key
///   itself when the key text is `x'<64 hex digits>'` (optionally followed by the salt's 32 hex
///   digits, `x'<key><salt>'`).
///
/// A page that is all zeros is read by SQLCipher as a zero page whatever the key (SQLite reads
/// past the end of a file that way), so it stays all zeros.
package struct SQLCipher3PageFormat: Sendable, Equatable {
    package static let saltSize = 16
    static let ivSize = 16
    static let hmacSize = 20
    static let keySize = 32
    static let hmacSaltMask: UInt8 = 0x3a
    static let hmacKeyIterations = 2
    /// SQLite never uses the page that holds byte 0x40000000 of the file (its lock byte).
    static let lockByteOffset = 0x4000_0000

    /// The page size in bytes (a power of two from 512 to 65536).
    package let pageSize: Int
    /// The bytes at the end of each page that are not encrypted: IV, HMAC, padding.
    package let reserve = 48

    /// The format of a file with `settings` (engine defaults filled in), or `nil` when it is not
    /// this format (no HMAC).
    package init?(settings: CipherSettings) {
        let effective = settings.effective
        guard effective.useHMAC == true, let pageSize = effective.pageSize, pageSize >= 512, pageSize <= 65536,
              pageSize & (pageSize - 1) == 0 else { return nil }
        self.pageSize = pageSize
    }

    /// Where the encrypted bytes of page `number` start: after the salt on page 1.
    func encryptedStart(page number: UInt32) -> Int { number == 1 ? Self.saltSize : 0 }

    /// The page number of SQLite's lock-byte page, which holds no data and is never written.
    package var lockBytePage: UInt32 { UInt32(Self.lockByteOffset / pageSize + 1) }
}

/// The two keys that encrypt and authenticate the pages of one file: SQLCipher's key derivation
/// for one key material and one salt. Held in buffers that are zeroed when released.
package struct PageKeys: Sendable {
    package let salt: [UInt8]
    let encryption: SecretBytes
    let authentication: SecretBytes

    /// Derives the keys `material` gives on a file with `salt` and `kdfIterations`, the way
    /// SQLCipher 3 does; `nil` when the material is a key-plus-salt form for another salt.
    ///
    /// Like SQLCipher, the key's bytes decide: `x'<64 hex>'` is a raw key, `x'<96 hex>'` a raw key
    /// plus salt, anything else a passphrase (one PBKDF2 run).
    package static func derive(from material: KeyMaterial, salt: [UInt8], kdfIterations: Int) -> PageKeys? {
        guard salt.count == SQLCipher3PageFormat.saltSize, kdfIterations > 0 else { return nil }
        let keySize = SQLCipher3PageFormat.keySize
        let encryption: SecretBytes? = material.withSQLCipherBytes { form in
            if let raw = rawKey(in: form, salt: salt) { return raw }
            if isRawKeyForm(form, hexDigits: 2 * (keySize + salt.count)) { return nil }  // a key for another salt
            return SecretBytes(count: keySize) { output in
                _ = PKCS5_PBKDF2_HMAC_SHA1(
                    form.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(form.count),
                    salt, Int32(salt.count), Int32(kdfIterations),
                    Int32(keySize), output.baseAddress?.assumingMemoryBound(to: UInt8.self))
            }
        }
        guard let encryption else { return nil }
        let hmacSalt = salt.map { $0 ^ SQLCipher3PageFormat.hmacSaltMask }
        let authentication = SecretBytes(count: keySize) { output in
            encryption.withUnsafeBytes { key in
                _ = PKCS5_PBKDF2_HMAC_SHA1(
                    key.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(key.count),
                    hmacSalt, Int32(hmacSalt.count), Int32(SQLCipher3PageFormat.hmacKeyIterations),
                    Int32(keySize), output.baseAddress?.assumingMemoryBound(to: UInt8.self))
            }
        }
        return PageKeys(salt: salt, encryption: encryption, authentication: authentication)
    }

    /// The `x'<64 hex key><32 hex salt>'` text that keys a connection on a file with these keys
    /// without a key derivation.
    package var keySpec: KeyMaterial {
        let form = SecretBytes(count: 3 + 2 * (SQLCipher3PageFormat.keySize + salt.count)) { buffer in
            buffer[0] = UInt8(ascii: "x")
            buffer[1] = UInt8(ascii: "'")
            var index = 2
            func append(_ byte: UInt8) {
                Hex.write(byte, into: buffer, at: index)
                index += 2
            }
            encryption.withUnsafeBytes { key in key.forEach(append) }
            salt.forEach(append)
            buffer[index] = UInt8(ascii: "'")
        }
        return KeyMaterial(kind: .rawKey, sqlcipherForm: form)
    }

    /// The raw key in `x'<64 hex>'`, or in `x'<64 hex><32 hex salt>'` when that salt is `salt`.
    private static func rawKey(in form: UnsafeRawBufferPointer, salt: [UInt8]) -> SecretBytes? {
        let keyDigits = 2 * SQLCipher3PageFormat.keySize
        if isRawKeyForm(form, hexDigits: keyDigits) {
            return SecretBytes(count: SQLCipher3PageFormat.keySize) { _ = Hex.decode(form, from: 2, into: $0) }
        }
        if isRawKeyForm(form, hexDigits: keyDigits + 2 * salt.count) {
            var embedded = [UInt8](repeating: 0, count: salt.count)
            _ = embedded.withUnsafeMutableBytes { Hex.decode(form, from: 2 + keyDigits, into: $0) }
            guard embedded == salt else { return nil }
            return SecretBytes(count: SQLCipher3PageFormat.keySize) { _ = Hex.decode(form, from: 2, into: $0) }
        }
        return nil
    }

    /// SQLCipher's test: exactly `x'` + `hexDigits` hex digits + one more byte.
    private static func isRawKeyForm(_ form: UnsafeRawBufferPointer, hexDigits: Int) -> Bool {
        guard form.count == hexDigits + 3, form[0] | 0x20 == UInt8(ascii: "x"), form[1] == UInt8(ascii: "'") else { return false }
        return (2..<(2 + hexDigits)).allSatisfy { Hex.value(of: form[$0]) != nil }
    }
}

/// Authenticates, decrypts and encrypts pages of one file with one set of ``PageKeys``, with
/// OpenSSL's AES-256-CBC and HMAC-SHA1 (the primitives SQLCipher itself calls).
///
/// Holds OpenSSL contexts with the key schedules, so it belongs to one thread at a time; the
/// contexts are freed (and cleansed by OpenSSL) when it is released.
package final class PageCipher {
    let format: SQLCipher3PageFormat
    private let decryptor: OpaquePointer
    private let encryptor: OpaquePointer
    private let mac: OpaquePointer

    /// OpenSSL's HMAC implementation, fetched once per process. A fetched algorithm is immutable
    /// and reference-counted by OpenSSL; creating contexts from it on several threads is safe.
    nonisolated(unsafe) private static let hmac: OpaquePointer? = EVP_MAC_fetch(nil, "HMAC", nil)

    /// Prepares the contexts for `keys`; `nil` when OpenSSL cannot provide them.
    package init?(keys: PageKeys, format: SQLCipher3PageFormat) {
        guard let decryptor = EVP_CIPHER_CTX_new() else { return nil }
        guard let encryptor = EVP_CIPHER_CTX_new() else { EVP_CIPHER_CTX_free(decryptor); return nil }
        guard let hmac = Self.hmac, let mac = EVP_MAC_CTX_new(hmac) else {
            EVP_CIPHER_CTX_free(decryptor); EVP_CIPHER_CTX_free(encryptor); return nil
        }
        self.format = format
        self.decryptor = decryptor
        self.encryptor = encryptor
        self.mac = mac
        let ready = keys.encryption.withUnsafeBytes { key -> Bool in
            let bytes = key.baseAddress!.assumingMemoryBound(to: UInt8.self)
            return EVP_CipherInit_ex(decryptor, EVP_aes_256_cbc(), nil, bytes, nil, 0) == 1
                && EVP_CipherInit_ex(encryptor, EVP_aes_256_cbc(), nil, bytes, nil, 1) == 1
                && EVP_CIPHER_CTX_set_padding(decryptor, 0) == 1
                && EVP_CIPHER_CTX_set_padding(encryptor, 0) == 1
        } && keys.authentication.withUnsafeBytes { key -> Bool in
            // OSSL_PARAM keeps pointers to both strings: they must live until EVP_MAC_init returns.
            "digest".withCString { name in
                "SHA1".withCString { digest in
                    var parameters = [
                        OSSL_PARAM_construct_utf8_string(name, UnsafeMutablePointer(mutating: digest), 0),
                        OSSL_PARAM_construct_end(),
                    ]
                    return EVP_MAC_init(mac, key.baseAddress!.assumingMemoryBound(to: UInt8.self), key.count, &parameters) == 1
                }
            }
        }
        guard ready else { return nil }
    }

    deinit {
        EVP_CIPHER_CTX_free(decryptor)
        EVP_CIPHER_CTX_free(encryptor)
        EVP_MAC_CTX_free(mac)
    }

    /// `true` when `page` (one whole page as stored) carries a valid HMAC for page `number`, or is
    /// all zeros.
    package func authenticates(_ page: UnsafeRawBufferPointer, number: UInt32) -> Bool {
        if Self.isAllZeros(page) { return true }
        var computed = (UInt64(0), UInt64(0), UInt32(0))
        return withUnsafeMutableBytes(of: &computed) { digest in
            guard hmac(page, number: number, into: digest) else { return false }
            let stored = UnsafeRawBufferPointer(rebasing: page[(format.pageSize - format.reserve + SQLCipher3PageFormat.ivSize)...])
            return constantTimeEqual(stored.prefix(SQLCipher3PageFormat.hmacSize), UnsafeRawBufferPointer(digest).prefix(SQLCipher3PageFormat.hmacSize))
        }
    }

    /// Decrypts `page` (as stored, not all zeros) into `plaintext` (a whole page; page 1 gets
    /// SQLite's file header in its first 16 bytes). Returns `false`, writing nothing useful, when
    /// the HMAC does not match.
    package func decrypt(_ page: UnsafeRawBufferPointer, number: UInt32, into plaintext: UnsafeMutableRawBufferPointer) -> Bool {
        guard authenticates(page, number: number) else { return false }
        let start = format.encryptedStart(page: number)
        let end = format.pageSize - format.reserve
        let iv = page.baseAddress! + end
        guard crypt(decryptor, iv: iv, input: page.baseAddress! + start, count: end - start, output: plaintext.baseAddress! + start) else { return false }
        if number == 1 {
            for (index, byte) in "SQLite format 3\0".utf8.enumerated() { plaintext[index] = byte }
        }
        // SQLCipher leaves the reserve of a decrypted page holding the IV and whatever follows;
        // SQLite ignores it. Keep the stored bytes so that the plaintext page is complete.
        plaintext[end...].copyBytes(from: page[end...])
        return true
    }

    /// Encrypts the plaintext `page` into `output` (a whole page as stored) for page `number`,
    /// with `random` (``SQLCipher3PageFormat/reserve`` bytes) as the IV and padding, and writes
    /// the salt of these keys into page 1.
    package func encrypt(_ page: UnsafeRawBufferPointer, number: UInt32, salt: [UInt8], random: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Bool {
        let start = format.encryptedStart(page: number)
        let end = format.pageSize - format.reserve
        output[end...].copyBytes(from: random.prefix(format.reserve))
        if number == 1 {
            for (index, byte) in salt.enumerated() { output[index] = byte }
        }
        guard crypt(encryptor, iv: output.baseAddress! + end, input: page.baseAddress! + start, count: end - start, output: output.baseAddress! + start) else { return false }
        let digest = UnsafeMutableRawBufferPointer(rebasing: output[(end + SQLCipher3PageFormat.ivSize)...].prefix(SQLCipher3PageFormat.hmacSize))
        return hmac(UnsafeRawBufferPointer(output), number: number, into: digest)
    }

    /// HMAC-SHA1 over the page's ciphertext and IV, then its number (4 bytes, little-endian).
    private func hmac(_ page: UnsafeRawBufferPointer, number: UInt32, into digest: UnsafeMutableRawBufferPointer) -> Bool {
        let start = format.encryptedStart(page: number)
        let covered = format.pageSize - format.reserve + SQLCipher3PageFormat.ivSize - start
        var pageNumber = number.littleEndian
        var length = 0
        // A NULL key re-initializes the context with the key it already holds.
        guard EVP_MAC_init(mac, nil, 0, nil) == 1,
              EVP_MAC_update(mac, page.baseAddress!.assumingMemoryBound(to: UInt8.self) + start, covered) == 1,
              withUnsafeBytes(of: &pageNumber, { EVP_MAC_update(mac, $0.baseAddress!.assumingMemoryBound(to: UInt8.self), 4) }) == 1,
              EVP_MAC_final(mac, digest.baseAddress!.assumingMemoryBound(to: UInt8.self), &length, digest.count) == 1
        else { return false }
        return length == SQLCipher3PageFormat.hmacSize
    }

    private func crypt(_ context: OpaquePointer, iv: UnsafeRawPointer, input: UnsafeRawPointer, count: Int, output: UnsafeMutableRawPointer) -> Bool {
        var written: Int32 = 0
        var final: Int32 = 0
        // A NULL key keeps the context's key schedule; only the IV changes.
        return EVP_CipherInit_ex(context, nil, nil, nil, iv.assumingMemoryBound(to: UInt8.self), -1) == 1
            && EVP_CipherUpdate(context, output.assumingMemoryBound(to: UInt8.self), &written, input.assumingMemoryBound(to: UInt8.self), Int32(count)) == 1
            && EVP_CipherFinal_ex(context, output.assumingMemoryBound(to: UInt8.self) + Int(written), &final) == 1
            && Int(written + final) == count
    }

    /// `true` when every byte of `page` is zero: SQLCipher reads such a page as zeros with any key.
    package static func isAllZeros(_ page: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset + 8 <= page.count {
            if page.loadUnaligned(fromByteOffset: offset, as: UInt64.self) != 0 { return false }
            offset += 8
        }
        return page[offset...].allSatisfy { $0 == 0 }
    }

    private func constantTimeEqual(_ a: UnsafeRawBufferPointer.SubSequence, _ b: UnsafeRawBufferPointer.SubSequence) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for (x, y) in zip(a, b) { difference |= x ^ y }
        return difference == 0
    }
}
