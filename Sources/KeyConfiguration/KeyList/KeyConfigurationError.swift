import CipherFormats
import Foundation

/// A problem with key configuration: a key list, a key source or the `Keys` file.
///
/// Every case names the database and key id (or the `Keys` file and the place in it) and says what
/// to do. None ever contains key material.
///
/// ```swift
/// do {
///     let keys = try KeysFile.load(path: "Keys").keyList(forDatabase: "app.sqlite")
/// } catch {
///     print(error)  // where the problem is and what to do; never key material
/// }
/// ```
public enum KeyConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The key list has no keys.
    case emptyKeyList(database: String)
    /// A key has an empty id (1-based position in the list).
    case emptyKeyID(database: String, position: Int)
    /// Two keys share an id.
    case duplicateKeyID(String, database: String)
    /// A key is listed before an older one (by their `created` dates): opening would rotate files
    /// back to the older key, since the last key is the current one.
    case keysOutOfOrder(database: String, newerKeyID: String, newerCreated: Date, olderKeyID: String, olderCreated: Date)
    /// Two keys have the same material, so rotating between them would change nothing.
    case duplicateKeyMaterial(keyID: String, sameAs: String, database: String)
    /// The key's material is not usable.
    case invalidMaterial(keyID: String, database: String, source: String, problem: KeyMaterialProblem)
    /// The environment variable a key comes from is not set. `variable` is its name, or a phrase
    /// saying it is not shown when it is not written in `UPPER_CASE` (it may be a key).
    case environmentVariableUnset(variable: String, keyID: String, database: String)
    /// The key file could not be read.
    case keyFileUnreadable(path: String, keyID: String, database: String, reason: String)
    /// The key file can be read or written by group or others (`mode` is its permission bits).
    case keyFileTooPermissive(path: String, mode: UInt32, keyID: String, database: String)
    /// The key file, or a folder above it, breaks the trust rules (see ``FileTrustProblem``).
    case keyFileUntrusted(path: String, keyID: String, database: String, problem: FileTrustProblem)
    /// A key entry in the `Keys` file names no source, or more than one.
    case keySourceCount(keyID: String, database: String, sources: [String], keysFile: String)
    /// The `Keys` file does not exist.
    case keysFileMissing(path: String)
    /// The `Keys` file could not be read.
    case keysFileUnreadable(path: String, reason: String)
    /// The `Keys` file, or a folder above it, breaks the trust rules (see ``FileTrustProblem``).
    case keysFileUntrusted(path: String, problem: FileTrustProblem)
    /// The `Keys` file is not valid YAML or not of the expected shape; `location` says where.
    case keysFileInvalid(path: String, location: String, problem: String)
    /// The `Keys` file has a field this library does not know (often a typo).
    case unknownField(path: String, location: String, field: String, allowed: [String])
    /// A `plaintext` entry that is not the first of several entries (it stands for the oldest state
    /// of the file, and the current key must be a real key).
    case plaintextEntryMisplaced(keyID: String, database: String)
    /// A key's cipher settings are not values SQLCipher accepts.
    case invalidCipherSettings(keyID: String, database: String, problem: String)
    /// The `Keys` file has no entry for this database. `database` is the path as given and
    /// `resolvedPath` the file it names (a relative path is taken from the working directory);
    /// `configured` are the entries' paths as written and `resolvedConfigured` the files they name
    /// (relative entries are taken from the Keys file's folder), in file order.
    case databaseNotConfigured(database: String, resolvedPath: String, keysFile: String, configured: [String], resolvedConfigured: [String])
    /// A wrapped data key names a key-encryption key that the KEK list does not have.
    case keyEncryptionKeyNotListed(keyEncryptionKeyID: String, keyID: String, database: String, listed: [String])
    /// A data key could not be wrapped with a key-encryption key.
    case wrapping(keyID: String, keyEncryptionKeyID: String, database: String, problem: KeyWrappingProblem)
    /// A wrapped data key did not unwrap: the wrong KEK, an altered value, a value copied from
    /// another key entry, or a key manager that failed. Nothing was opened.
    case unwrapping(keyID: String, keyEncryptionKeyID: String, database: String, problem: KeyWrappingProblem)
    /// A key-encryption key could not be made ready (its passphrase has no salt, its token
    /// refused the PIN, its module is missing, …).
    case keyEncryptionKeyUnavailable(keyEncryptionKeyID: String, source: String, problem: KeyWrappingProblem)
    /// A `credential:` source is used outside a systemd service: `$CREDENTIALS_DIRECTORY` is not set.
    case credentialsDirectoryUnset(credential: String, keyID: String, database: String)
    /// A `credential:` name is empty or holds a `/`.
    case credentialNameInvalid(keyID: String, database: String)

    /// Stands for an unknown field name in ``unknownField(path:location:field:allowed:)`` when the
    /// name does not look like a field name (it may be a value, such as a key written as
    /// `passphrase:secret` without a space, which YAML reads as one name). It is never shown.
    public static let hiddenFieldName = "<not shown>"

    /// Every field name the Keys file format defines, in any mapping.
    static let formatFieldNames = [
        "databases", "path", "keys", "id", "passphrase", "hex", "env", "file", "format", "plaintext", "cipher", "legacy",
        "created", "max_key_age_days", "compatibility", "kdf_iter", "page_size", "use_hmac", "kdf_algorithm", "hmac_algorithm",
        "plaintext_header_size", "hmac_pgno", "hmac_salt_mask", "fast_kdf_iter", "credential", "wrapped_by", "wrapped_key",
        "key_encryption_keys", "salt", "pkcs11", "module", "token", "slot", "key", "pin_env", "pin_file", "external",
    ]

    /// `name` when it is a field name of the format or a near miss of one (at most two letters
    /// added, dropped or changed, ignoring case: a typo such as `passprase`); else
    /// ``hiddenFieldName``, so that a value typed in the place of a name (possibly a key, even one
    /// shaped like a word) never appears in an error.
    static func shownFieldName(_ name: String, allowed: [String] = []) -> String {
        let lowered = Array(name.lowercased().utf8)
        guard lowered.count <= 40 else { return hiddenFieldName }
        let near = (formatFieldNames + allowed).contains { field in
            let limit = field.count <= 4 ? 1 : 2
            return editDistance(lowered, Array(field.utf8), limit: limit) <= limit
        }
        return near ? name : hiddenFieldName
    }

    /// The Levenshtein distance of `a` and `b`, or `limit + 1` when it is larger than `limit`.
    private static func editDistance(_ a: [UInt8], _ b: [UInt8], limit: Int) -> Int {
        guard abs(a.count - b.count) <= limit else { return limit + 1 }
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1] + [Int](repeating: 0, count: b.count)
            for (j, y) in b.enumerated() {
                current[j + 1] = Swift.min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }

    /// `variable` when it is written the way environment variables conventionally are (upper-case
    /// letters, digits and `_`), else a phrase that does not show it: a passphrase written under
    /// `env:` by mistake is usually not upper case, and must not be printed as a variable's name.
    static func shownVariableName(_ variable: String) -> String {
        let conventional = !variable.isEmpty && variable.unicodeScalars.allSatisfy { $0 == "_" || ("A"..."Z").contains($0) || ("0"..."9").contains($0) }
        return conventional ? variable : "(its name is not shown: it is not written in UPPER_CASE, so it may be a key given under env: by mistake)"
    }

    /// `database: `, or nothing when there is no database to name.
    private static func place(_ database: String) -> String { database.isEmpty ? "" : "\(database): " }

    /// What is wrong, where, and what to do.
    public var description: String {
        switch self {
        case .emptyKeyList(let database):
            return "\(database): the key list is empty; list at least one key (the last one is the current key)"
        case let .emptyKeyID(database, position):
            return "\(database): key \(position) has an empty id; give every key a label such as \"2025-06\""
        case let .duplicateKeyID(id, database):
            return "\(database): key id \"\(id)\" appears twice; give every key its own id"
        case let .keysOutOfOrder(database, newerKeyID, newerCreated, olderKeyID, olderCreated):
            let newer = KeyCreationDate.text(of: newerCreated), older = KeyCreationDate.text(of: olderCreated)
            return "\(database): key \"\(newerKeyID)\" (created \(newer)) is listed before the older key \"\(olderKeyID)\" (created \(older)), so files would be rotated back to the older key; list keys oldest first (the last is the current key), or correct their created dates"
        case let .duplicateKeyMaterial(keyID, sameAs, database):
            return "\(database): keys \"\(sameAs)\" and \"\(keyID)\" have the same material, so a rotation between them would change nothing; give the new key new material"
        case let .invalidMaterial(keyID, database, source, problem):
            return "\(database): key \"\(keyID)\" (\(source)): \(problem)"
        case let .environmentVariableUnset(variable, keyID, database):
            return "\(database): key \"\(keyID)\" reads environment variable \(Self.shownVariableName(variable)), which is not set; export it before running (or, if the name is the key itself, put the key in a variable and give its name)"
        case let .keyFileUnreadable(path, keyID, database, reason):
            return "\(database): key \"\(keyID)\": cannot read key file \(path) (\(reason)); check the path, and that it is a regular file this user can read"
        case let .keyFileTooPermissive(path, mode, keyID, database):
            return "\(database): key \"\(keyID)\": key file \(path) is accessible by group or others (mode \(String(mode, radix: 8))); run: chmod 600 \(path)"
        case let .keyFileUntrusted(path, keyID, database, problem):
            return "\(database): key \"\(keyID)\": key file \(path) is not trusted: \(problem.explanation(path: path))"
        case let .keySourceCount(keyID, database, sources, keysFile):
            if sources.isEmpty {
                return "\(keysFile): database \(database), key \"\(keyID)\" has no material; give exactly one of passphrase, hex, env, file, credential, wrapped_key (with wrapped_by) (or plaintext: true for the first entry)"
            }
            return "\(keysFile): database \(database), key \"\(keyID)\" has several sources (\(sources.joined(separator: ", "))); give exactly one of passphrase, hex, env, file, credential, wrapped_key (with wrapped_by) (or plaintext: true for the first entry)"
        case .keysFileMissing(let path):
            return "Keys file \(path) does not exist; copy Keys.example to it, or point --keys / REKEY_KEYS_FILE at yours"
        case let .keysFileUnreadable(path, reason):
            return "Keys file \(path) cannot be read (\(reason)); check that it is a file this user can read, or point --keys / REKEY_KEYS_FILE at yours"
        case let .keysFileUntrusted(path, problem):
            return "Keys file \(path) is not trusted: \(problem.explanation(path: path))"
        case let .keysFileInvalid(path, location, problem):
            return "Keys file \(path) is invalid at \(location): \(problem); see Keys.example for the expected shape"
        case let .unknownField(path, location, field, allowed):
            if field == Self.hiddenFieldName {
                return "Keys file \(path) has an unknown field at \(location) that does not look like a field name, so it is not shown (it may hold a key, e.g. `passphrase:secret` written without a space after the colon); fix it: allowed there: \(allowed.joined(separator: ", "))"
            }
            return "Keys file \(path) has an unknown field \"\(field)\" at \(location); check its spelling: allowed there: \(allowed.joined(separator: ", "))"
        case let .plaintextEntryMisplaced(keyID, database):
            return "\(database): key \"\(keyID)\" is a plaintext entry; move it to the top: it may only be the first (oldest) entry of a list that also has a real current key"
        case let .invalidCipherSettings(keyID, database, problem):
            return "\(database): key \"\(keyID)\" has invalid cipher settings: \(problem); fix its cipher: settings (see Keys.example)"
        case let .keyEncryptionKeyNotListed(kekID, keyID, database, listed):
            let listedText = listed.isEmpty ? "none" : listed.joined(separator: ", ")
            if kekID.isEmpty { return "\(Self.place(database))no key-encryption key is listed to wrap data key \"\(keyID)\" with: add one to key_encryption_keys (see the Key Managers article)" }
            if keyID.isEmpty { return "no key-encryption key \"\(kekID)\" is listed (key_encryption_keys: \(listedText)); add it to key_encryption_keys" }
            return "\(Self.place(database))key \"\(keyID)\" is wrapped by key-encryption key \"\(kekID)\", which key_encryption_keys does not list (listed: \(listedText)); add that KEK back until `rekey keys rewrap` has rewrapped the key to a listed one"
        case let .wrapping(keyID, kekID, database, problem):
            return "\(Self.place(database))key \"\(keyID)\" could not be wrapped with key-encryption key \"\(kekID)\": \(problem); nothing was changed"
        case let .unwrapping(keyID, kekID, database, problem):
            return "\(Self.place(database))key \"\(keyID)\" could not be unwrapped with key-encryption key \"\(kekID)\": \(problem); nothing was opened or changed. Restore this entry's wrapped_by and wrapped_key from the Keys file's last good copy, or check the KEK's source"
        case let .keyEncryptionKeyUnavailable(kekID, source, problem):
            return "key-encryption key \"\(kekID)\" (\(source)) is not usable: \(problem); nothing was opened or changed"
        case let .credentialsDirectoryUnset(credential, keyID, database):
            return "\(Self.place(database))key \"\(keyID)\" reads systemd credential \(credential), but CREDENTIALS_DIRECTORY is not set: run it as a systemd service with LoadCredential= or LoadCredentialEncrypted= (see the Key Managers article), or use a file: source"
        case let .credentialNameInvalid(keyID, database):
            return "\(Self.place(database))key \"\(keyID)\": a credential: name is a plain file name in $CREDENTIALS_DIRECTORY (no /, not empty)"
        case let .databaseNotConfigured(database, resolvedPath, keysFile, _, resolvedConfigured):
            let list = resolvedConfigured.isEmpty ? "none" : resolvedConfigured.joined(separator: ", ")
            let relative = !database.hasPrefix("/")
            let given = resolvedPath == database ? database : "\(database) (from the working directory: \(resolvedPath))"
            let hint = relative ? "a relative database path is taken from the working directory, so give it from there or as an absolute path, or " : ""
            return "\(given) is not listed in Keys file \(keysFile) (its entries, taken from its folder: \(list)); \(hint)add an entry with its keys"
        }
    }
}

extension KeyConfigurationError: LocalizedError {
    /// The same text as ``description``, so that `localizedDescription` says what happened and what
    /// to do.
    public var errorDescription: String? { description }
}
