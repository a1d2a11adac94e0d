import COpenSSLCrypto

/// SHA-256 through OpenSSL's libcrypto, over several buffers without joining them (so that a
/// secret among them is never copied).
package enum SHA256Digest {
    /// The 32-byte SHA-256 of `parts`, one after the other; `nil` when OpenSSL fails.
    package static func of(_ parts: [UnsafeRawBufferPointer]) -> [UInt8]? {
        guard let context = EVP_MD_CTX_new() else { return nil }
        defer { EVP_MD_CTX_free(context) }
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        guard EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1,
              parts.allSatisfy({ EVP_DigestUpdate(context, $0.baseAddress, $0.count) == 1 }),
              EVP_DigestFinal_ex(context, &digest, &length) == 1, length == 32 else { return nil }
        return digest
    }
}
