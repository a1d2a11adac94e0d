import DurableFiles
import Foundation

/// Tells whether a file the linked engine cannot open is a SQLCipher 4 database (default
/// settings) and which configured key is right for it, without decrypting anything.
///
/// SQLCipher 4's default format: the file's first 16 bytes are the salt; the encryption key is
/// PBKDF2-HMAC-SHA512(passphrase, salt, 256,000 iterations, 32 bytes) — or the raw key itself for
/// `x'…'` keys; the HMAC key is PBKDF2-HMAC-SHA512(encryption key, salt XOR 0x3a, 2 iterations,
/// 32 bytes); pages are 4096 bytes and end with a 16-byte IV and a 64-byte HMAC-SHA512 over the
/// page's ciphertext, its IV and the page number (4 bytes, little-endian). On page 1 the
/// authenticated region starts after the salt. A key whose HMAC matches page 1 is the right key.
///
/// This only runs after every key failed to open the file, so it costs nothing in normal use; each
/// passphrase costs one 256,000-round PBKDF2.
package struct SQLCipher4Diagnosis {
    let path: String

    /// A diagnosis of the file at `path`.
    package init(path: String) { self.path = path }

    static let format = PageFormat.sqlcipher4()

    /// The id of the first key (in `keys`' order) that is right for this file under SQLCipher 4's
    /// defaults, or `nil` when the file does not look like one or no key matches. Derives and
    /// checks through ``PageKeys`` and ``PageCipher``, as the page re-encryption does.
    package func matchingKeyID(among keys: [(id: String, material: KeyMaterial?)]) -> String? {
        guard let page = firstPage(), !page.withUnsafeBytes({ PageCipher.isAllZeros($0) }) else { return nil }
        let salt = Array(page[0..<PageFormat.saltSize])
        for key in keys {
            guard let material = key.material, let pageKeys = PageKeys.derive(from: material, salt: salt, format: Self.format),
                  let cipher = PageCipher(keys: pageKeys, format: Self.format) else { continue }
            if page.withUnsafeBytes({ cipher.authenticates($0, number: 1) }) { return key.id }
        }
        return nil
    }

    /// Page 1, when the file's size fits SQLCipher 4's default page size.
    private func firstPage() -> [UInt8]? {
        let pageSize = Self.format.pageSize
        guard let size = FileSystem.size(of: path), size >= Int64(pageSize), size % Int64(pageSize) == 0 else { return nil }
        // Through SQLite's file layer, like every read of a database file (DatabaseFilePrefix).
        guard case .success(let bytes) = DatabaseFilePrefix.read(path, count: pageSize), bytes.count == pageSize else { return nil }
        return bytes
    }
}
