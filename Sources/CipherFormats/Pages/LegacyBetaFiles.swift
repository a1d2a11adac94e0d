import Foundation

extension SQLCipherEngine {
    /// `true` when page 1 of the file at `path` authenticates with `material` in the SQLCipher
    /// 2.0 beta format (``beta20``). The check runs in the library's own page layer (PBKDF2 and
    /// HMAC through OpenSSL), so it changes no setting of the engine: a `legacy` key tries that
    /// format, whose HMAC salt mask the engine keeps for the whole process, only for a file that
    /// is one, never on the way to another format.
    package static func isBeta20File(at path: String, material: KeyMaterial) -> Bool {
        guard let format = PageFormat(settings: beta20),
              case .success(let page) = DatabaseFilePrefix.read(path, count: format.pageSize), page.count == format.pageSize,
              let keys = PageKeys.derive(from: material, salt: Array(page.prefix(PageFormat.saltSize)), format: format),
              let cipher = PageCipher(keys: keys, format: format)
        else { return false }
        return page.withUnsafeBytes { !PageCipher.isAllZeros($0) && cipher.authenticates($0, number: 1) }
    }
}
