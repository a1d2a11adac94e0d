import COpenSSLCrypto

/// AES-256-GCM through OpenSSL's libcrypto, for wrapping 32-byte keys with a key-encryption key.
///
/// A sealed value is a random 96-bit nonce, the ciphertext (as long as the plaintext) and the
/// 16-byte tag, in that order: the layout of swift-crypto's `AES.GCM.SealedBox.combined`, which
/// wrapped keys written by earlier versions of this library use.
///
/// ```swift
/// let sealed = key.withUnsafeBytes { plaintext in AES256GCM.seal(plaintext, key: kek, associatedData: context) }
/// let opened = AES256GCM.open(sealed!, key: kek, associatedData: context)  // nil: not authentic
/// ```
package enum AES256GCM {
    /// The size of the nonce at the start of a sealed value.
    package static let nonceSize = 12
    /// The size of the tag at the end of a sealed value.
    package static let tagSize = 16

    /// `plaintext` sealed under `key` (32 bytes) with a fresh random nonce, authenticating
    /// `associatedData`; `nil` when OpenSSL fails.
    package static func seal(_ plaintext: UnsafeRawBufferPointer, key: SecretBytes, associatedData: [UInt8]) -> [UInt8]? {
        guard key.count == 32, let context = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        var sealed = [UInt8](repeating: 0, count: nonceSize + plaintext.count + tagSize)
        let succeeded = sealed.withUnsafeMutableBytes { output -> Bool in
            let nonce = output.baseAddress!.assumingMemoryBound(to: UInt8.self)
            let ciphertext = nonce + nonceSize
            var written: Int32 = 0, finalWritten: Int32 = 0
            return RAND_bytes(nonce, Int32(nonceSize)) == 1
                && EVP_EncryptInit_ex(context, EVP_aes_256_gcm(), nil, nil, nil) == 1
                && key.withUnsafeBytes { EVP_EncryptInit_ex(context, nil, nil, $0.baseAddress!.assumingMemoryBound(to: UInt8.self), nonce) } == 1
                && authenticate(associatedData, context: context, encrypting: true)
                && EVP_EncryptUpdate(context, ciphertext, &written, plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(plaintext.count)) == 1
                && EVP_EncryptFinal_ex(context, ciphertext + Int(written), &finalWritten) == 1
                && Int(written + finalWritten) == plaintext.count
                && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, Int32(tagSize), ciphertext + plaintext.count) == 1
        }
        return succeeded ? sealed : nil
    }

    /// The plaintext of `sealed` (a value ``seal(_:key:associatedData:)`` made), in a buffer that
    /// is zeroed when released; `nil` when it is too short, or was not sealed under `key` with
    /// this `associatedData`, or was changed.
    package static func open(_ sealed: [UInt8], key: SecretBytes, associatedData: [UInt8]) -> SecretBytes? {
        guard key.count == 32, sealed.count >= nonceSize + tagSize, let context = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        var tag = Array(sealed.suffix(tagSize))
        var succeeded = false
        let plaintext = SecretBytes(count: sealed.count - nonceSize - tagSize) { output in
            sealed.withUnsafeBytes { input in
                let nonce = input.baseAddress!.assumingMemoryBound(to: UInt8.self)
                let out = output.baseAddress?.assumingMemoryBound(to: UInt8.self)
                var written: Int32 = 0, finalWritten: Int32 = 0
                succeeded = EVP_DecryptInit_ex(context, EVP_aes_256_gcm(), nil, nil, nil) == 1
                    && key.withUnsafeBytes { EVP_DecryptInit_ex(context, nil, nil, $0.baseAddress!.assumingMemoryBound(to: UInt8.self), nonce) } == 1
                    && authenticate(associatedData, context: context, encrypting: false)
                    && EVP_DecryptUpdate(context, out, &written, nonce + nonceSize, Int32(output.count)) == 1
                    && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, Int32(tagSize), &tag) == 1
                    // The tag is checked here: anything but 1 means the value is not authentic.
                    && EVP_DecryptFinal_ex(context, out.map { $0 + Int(written) }, &finalWritten) == 1
            }
        }
        return succeeded ? plaintext : nil
    }

    /// Feeds `associatedData` to the context (authenticated, not encrypted).
    private static func authenticate(_ associatedData: [UInt8], context: OpaquePointer, encrypting: Bool) -> Bool {
        guard !associatedData.isEmpty else { return true }
        var written: Int32 = 0
        return encrypting
            ? EVP_EncryptUpdate(context, nil, &written, associatedData, Int32(associatedData.count)) == 1
            : EVP_DecryptUpdate(context, nil, &written, associatedData, Int32(associatedData.count)) == 1
    }
}
