import COpenSSLCrypto
import Foundation

/// Authenticates, decrypts and encrypts pages of one file with one set of ``PageKeys``, with
/// OpenSSL's AES-256-CBC and the format's HMAC digest (the primitives SQLCipher itself calls).
///
/// Holds OpenSSL contexts with the key schedules, so it belongs to one thread at a time; the
/// contexts are freed (and cleansed by OpenSSL) when it is released.
package final class PageCipher {
    package let format: PageFormat
    private let decryptor: OpaquePointer
    private let encryptor: OpaquePointer
    private let mac: OpaquePointer

    /// OpenSSL's HMAC implementation, fetched once per process. A fetched algorithm is immutable
    /// and reference-counted by OpenSSL; creating contexts from it on several threads is safe.
    nonisolated(unsafe) private static let hmac: OpaquePointer? = EVP_MAC_fetch(nil, "HMAC", nil)

    /// Prepares the contexts for `keys`; `nil` when OpenSSL cannot provide them or the format
    /// has no HMAC.
    package init?(keys: PageKeys, format: PageFormat) {
        guard let digestName = format.hmac?.openSSLName else { return nil }
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
                digestName.withCString { digest in
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
        var computed = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        return withUnsafeMutableBytes(of: &computed) { digest in
            let digest = UnsafeMutableRawBufferPointer(rebasing: digest.prefix(format.hmacSize))
            guard hmac(page, number: number, into: digest) else { return false }
            let stored = UnsafeRawBufferPointer(rebasing: page[(format.pageSize - format.reserve + PageFormat.ivSize)...])
            return constantTimeEqual(stored.prefix(format.hmacSize), UnsafeRawBufferPointer(digest)[...])
        }
    }

    /// The number of the first page in `pages` (whole pages as stored, the first of which is
    /// page `first`) that does not authenticate (``authenticates(_:number:)``), skipping the
    /// lock-byte page; `nil` when every page does.
    package func firstUnauthenticatedPage(in pages: UnsafeRawBufferPointer, first: UInt32) -> UInt32? {
        let size = format.pageSize
        for index in 0..<(pages.count / size) {
            let number = first + UInt32(index)
            guard number != format.lockBytePage else { continue }
            if !authenticates(UnsafeRawBufferPointer(rebasing: pages[(index * size)..<((index + 1) * size)]), number: number) { return number }
        }
        return nil
    }

    /// Decrypts `page` (as stored, not all zeros) into `plaintext` (a whole page; page 1 gets
    /// SQLite's file header in its first 16 bytes). Returns `false`, writing nothing useful, when
    /// the HMAC does not match. With `authenticating: false` the HMAC is not checked: only for
    /// bytes the caller has authenticated already and that cannot have changed since.
    package func decrypt(_ page: UnsafeRawBufferPointer, number: UInt32, into plaintext: UnsafeMutableRawBufferPointer,
                         authenticating: Bool = true) -> Bool {
        guard !authenticating || authenticates(page, number: number) else { return false }
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
    /// with `random` (``PageFormat/reserve`` bytes) as the IV and padding, and writes
    /// the salt of these keys into page 1.
    package func encrypt(_ page: UnsafeRawBufferPointer, number: UInt32, salt: [UInt8], random: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Bool {
        let start = format.encryptedStart(page: number)
        let end = format.pageSize - format.reserve
        output[end...].copyBytes(from: random.prefix(format.reserve))
        if number == 1 {
            for (index, byte) in salt.enumerated() { output[index] = byte }
        }
        guard crypt(encryptor, iv: output.baseAddress! + end, input: page.baseAddress! + start, count: end - start, output: output.baseAddress! + start) else { return false }
        let digest = UnsafeMutableRawBufferPointer(rebasing: output[(end + PageFormat.ivSize)...].prefix(format.hmacSize))
        return hmac(UnsafeRawBufferPointer(output), number: number, into: digest)
    }

    /// The format's HMAC over the page's ciphertext and IV, then its number (4 bytes, in the
    /// format's byte order).
    private func hmac(_ page: UnsafeRawBufferPointer, number: UInt32, into digest: UnsafeMutableRawBufferPointer) -> Bool {
        let start = format.encryptedStart(page: number)
        let covered = format.pageSize - format.reserve + PageFormat.ivSize - start
        var pageNumber = format.hmacPageNumberBigEndian ? number.bigEndian : number.littleEndian
        var length = 0
        // A NULL key re-initializes the context with the key it already holds.
        guard EVP_MAC_init(mac, nil, 0, nil) == 1,
              EVP_MAC_update(mac, page.baseAddress!.assumingMemoryBound(to: UInt8.self) + start, covered) == 1,
              withUnsafeBytes(of: &pageNumber, { EVP_MAC_update(mac, $0.baseAddress!.assumingMemoryBound(to: UInt8.self), 4) }) == 1,
              EVP_MAC_final(mac, digest.baseAddress!.assumingMemoryBound(to: UInt8.self), &length, digest.count) == 1
        else { return false }
        return length == format.hmacSize
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

    /// OpenSSL's constant-time comparison of two byte ranges of the same length.
    private func constantTimeEqual(_ a: UnsafeRawBufferPointer.SubSequence, _ b: UnsafeRawBufferPointer.SubSequence) -> Bool {
        guard a.count == b.count else { return false }
        return CRYPTO_memcmp(a.base.baseAddress! + a.startIndex, b.base.baseAddress! + b.startIndex, a.count) == 0
    }
}
