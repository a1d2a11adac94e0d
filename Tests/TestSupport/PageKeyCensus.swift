@testable import CipherFormats
@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration

/// Which key each page of a database file is on, read from the file's bytes with the library's
/// page layer: the check that a file is not part old key, part new (what `PRAGMA integrity_check`
/// cannot tell, since it reads with one key).
public struct PageKeyCensus: Sendable, CustomStringConvertible {
    /// Pages that authenticate with each key id, in the order the keys were given.
    public let pages: [(id: String, count: Int)]
    /// Pages that authenticate with none of the keys (not counting all-zero pages).
    public let unauthenticated: Int
    /// Page 1's key id, when one key authenticates it.
    public let firstPageKeyID: String?

    /// The number of keys that have at least one page: 1 for a sound file.
    public var keysInUse: Int { pages.filter { $0.count > 0 }.count }

    public var description: String {
        pages.map { "\($0.id): \($0.count)" }.joined(separator: ", ") + ", none: \(unauthenticated), page 1 on \(firstPageKeyID ?? "no key")"
    }

    /// Reads every page of the file at `path` (not its `-wal`) and tries each key on it; `nil` when
    /// the page layer does not cover these keys' settings (no HMAC, a plaintext header).
    public static func take(path: String, keys: [ResolvedKey]) throws -> PageKeyCensus? {
        guard let first = keys.first, let format = PageFormat(settings: first.cipher), format.supportsPageReencryption else { return nil }
        let file = try Data(contentsOf: URL(fileURLWithPath: path))
        guard file.count >= format.pageSize else { return PageKeyCensus(pages: keys.map { ($0.id, 0) }, unauthenticated: 0, firstPageKeyID: nil) }
        let salt = Array(file.prefix(PageFormat.saltSize))
        var ciphers: [(String, PageCipher)] = []
        for key in keys {
            guard let material = key.material else { return nil }
            let spec = material.derived(forSalt: salt, derivation: format.keyDerivation) ?? material
            guard let pageKeys = PageKeys.derive(from: spec, salt: salt, format: format),
                  let cipher = PageCipher(keys: pageKeys, format: format) else { return nil }
            ciphers.append((key.id, cipher))
        }
        var counts = Array(repeating: 0, count: keys.count)
        var unauthenticated = 0
        var firstPage: String?
        file.withUnsafeBytes { bytes in
            for index in 0..<(bytes.count / format.pageSize) {
                let number = UInt32(index + 1)
                guard number != format.lockBytePage else { continue }
                let page = UnsafeRawBufferPointer(rebasing: bytes[(index * format.pageSize)..<((index + 1) * format.pageSize)])
                if page.allSatisfy({ $0 == 0 }) { continue }
                guard let match = ciphers.firstIndex(where: { $0.1.authenticates(page, number: number) }) else {
                    unauthenticated += 1
                    continue
                }
                counts[match] += 1
                if number == 1 { firstPage = ciphers[match].0 }
            }
        }
        return PageKeyCensus(pages: zip(keys, counts).map { ($0.id, $1) }, unauthenticated: unauthenticated, firstPageKeyID: firstPage)
    }
}
