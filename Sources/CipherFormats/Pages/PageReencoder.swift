import COpenSSLCrypto
import Foundation

/// Re-encrypts stored pages of one file from one set of ``PageKeys`` to another, in one
/// ``PageFormat``: each page is authenticated and decrypted with the old keys, then encrypted
/// with a fresh random IV and signed with the new ones. Page 1 keeps the salt of the new keys.
///
/// Holds OpenSSL contexts and a plaintext buffer (zeroed when released), so it belongs to one
/// thread at a time.
package final class PageReencoder {
    /// Why a page could not be re-encrypted; holds no key material.
    package enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// The page's HMAC does not match under the old keys: the page is damaged or the key wrong.
        case notAuthenticated(page: UInt32)
        /// OpenSSL failed (set-up, random bytes or cipher).
        case openSSL(String)

        package var description: String {
            switch self {
            case .notAuthenticated(let page): return "page \(page) does not authenticate with the old key: the file is damaged"
            case .openSSL(let what): return "OpenSSL \(what)"
            }
        }
    }

    package let format: PageFormat
    private let old: PageCipher
    private let new: PageCipher
    private let salt: [UInt8]
    private let plain: UnsafeMutableRawBufferPointer
    private let random: UnsafeMutableRawBufferPointer
    private let maximumPages: Int

    /// Prepares contexts for `old` → `new` and buffers for up to `maximumPages` pages at a time.
    /// - Throws: ``Failure/openSSL(_:)`` when OpenSSL cannot set up the ciphers.
    package init(from old: PageKeys, to new: PageKeys, format: PageFormat, maximumPages: Int) throws(Failure) {
        guard let oldCipher = PageCipher(keys: old, format: format), let newCipher = PageCipher(keys: new, format: format) else {
            throw .openSSL("could not set up the page cipher")
        }
        self.format = format
        self.old = oldCipher
        self.new = newCipher
        self.salt = new.salt
        self.maximumPages = max(1, maximumPages)
        plain = .allocate(byteCount: format.pageSize, alignment: 64)
        plain.initializeMemory(as: UInt8.self, repeating: 0)
        random = .allocate(byteCount: self.maximumPages * format.reserve, alignment: 64)
        random.initializeMemory(as: UInt8.self, repeating: 0)
    }

    deinit {
        explicit_bzero(plain.baseAddress!, plain.count)
        plain.deallocate()
        random.deallocate()
    }

    /// Re-encrypts in place the whole pages in `pages` (as stored, at most `maximumPages`), the
    /// first of which is page number `first`. The lock-byte page and all-zero pages stay as they
    /// are. `editPage1` may change the plaintext of page 1 before it is encrypted again.
    ///
    /// With `authenticating: false` the old HMACs are not checked again: for pages the caller
    /// authenticated when it read them before (``PageCipher/firstUnauthenticatedPage(in:first:)``)
    /// and that nobody could change since.
    /// - Throws: ``Failure`` at the first page that does not authenticate or OpenSSL failing;
    ///   then the pages before it are re-encrypted and the rest unchanged.
    package func reencrypt(_ pages: UnsafeMutableRawBufferPointer, first: UInt32, authenticating: Bool = true,
                           editPage1: (UnsafeMutableRawBufferPointer) -> Void = { _ in }) throws(Failure) {
        let size = format.pageSize
        let count = pages.count / size
        precondition(count <= maximumPages && count * size == pages.count, "whole pages, at most maximumPages")
        guard RAND_bytes(random.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(count * format.reserve)) == 1 else {
            throw .openSSL("random generator failed")
        }
        for index in 0..<count {
            let number = first + UInt32(index)
            let page = UnsafeMutableRawBufferPointer(rebasing: pages[(index * size)..<((index + 1) * size)])
            if number == format.lockBytePage || PageCipher.isAllZeros(UnsafeRawBufferPointer(page)) { continue }
            guard old.decrypt(UnsafeRawBufferPointer(page), number: number, into: plain, authenticating: authenticating) else { throw .notAuthenticated(page: number) }
            if number == 1 { editPage1(plain) }
            let padding = UnsafeRawBufferPointer(rebasing: random[(index * format.reserve)..<((index + 1) * format.reserve)])
            guard new.encrypt(UnsafeRawBufferPointer(plain), number: number, salt: salt, random: padding, into: page) else {
                throw .openSSL("failed to encrypt page \(number)")
            }
        }
    }
}
