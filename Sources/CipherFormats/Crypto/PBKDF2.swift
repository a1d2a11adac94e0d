import COpenSSLCrypto

/// PBKDF2-HMAC through OpenSSL's libcrypto, the library SQLCipher itself links: SQLCipher's page
/// keys (``PageKeys``), the check of a SQLCipher 4 file's key (``SQLCipher4Diagnosis``) and
/// passphrase key-encryption keys all derive here.
package enum PBKDF2 {
    /// `byteCount` bytes of PBKDF2-HMAC-`digest`(`secret`, `salt`, `iterations`), in a buffer
    /// that is zeroed when released; `nil` when OpenSSL fails.
    package static func derive(_ secret: UnsafeRawBufferPointer, salt: some Collection<UInt8>, iterations: Int,
                               digest: CipherDigest, byteCount: Int = PageFormat.keySize) -> SecretBytes? {
        let salt = Array(salt)
        var succeeded = false
        let key = SecretBytes(count: byteCount) { output in
            succeeded = PKCS5_PBKDF2_HMAC(
                secret.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(secret.count),
                salt, Int32(salt.count), Int32(iterations), digest.evp,
                Int32(output.count), output.baseAddress?.assumingMemoryBound(to: UInt8.self)) == 1
        }
        return succeeded ? key : nil
    }
}
