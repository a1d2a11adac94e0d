import CipherFormats
import Foundation

extension KeysFile {
    /// The key a key entry describes, after checking it: exactly one source, `format` only with
    /// `env` and `file` (and `binary` only with `file`), `plaintext` only as `true` and without
    /// cipher settings, `env` holding a variable's name, never a key, and `created` a date
    /// written `YYYY-MM-DD`.
    /// - Parameters:
    ///   - key: The entry as decoded.
    ///   - index: The position of its database entry in the file, for messages.
    ///   - database: The database path as written, for messages.
    ///   - keysFile: The Keys file's path, for messages.
    ///   - baseDirectory: The folder a relative key-file path is taken from.
    /// - Throws: ``KeyConfigurationError/keySourceCount(keyID:database:sources:keysFile:)`` or
    ///   ``KeyConfigurationError/keysFileInvalid(path:location:problem:)``.
    static func databaseKey(
        from key: KeyDocument, at index: Int, database: String, keysFile: String, baseDirectory: String
    ) throws(KeyConfigurationError) -> DatabaseKey {
        // Written out only for a message.
        var location: String { "databases[\(index)], key \"\(key.id)\"" }
        if (key.wrappedBy == nil) != (key.wrappedKey == nil) {
            throw .keysFileInvalid(path: keysFile, location: location, problem: "a wrapped data key needs both wrapped_by (the key-encryption key's id) and wrapped_key (the value in base64)")
        }
        guard key.presentSourceCount == 1 else {
            throw .keySourceCount(keyID: key.id, database: database, sources: key.presentSources, keysFile: keysFile)
        }
        if key.format != nil && key.env == nil && key.file == nil && key.credential == nil {
            throw .keysFileInvalid(path: keysFile, location: location, problem: "format applies to env, file and credential keys only")
        }
        if key.plaintext == false {
            throw .keysFileInvalid(path: keysFile, location: location, problem: "plaintext may only be true (leave it out for an encrypted key)")
        }
        if key.plaintext == true && (key.cipher != nil || key.legacy != nil) {
            throw .keysFileInvalid(path: keysFile, location: location, problem: "a plaintext entry has no cipher settings and is not legacy")
        }
        var created: Date?
        if let text = key.created {
            // Not echoed: the file's text is never quoted.
            guard let date = KeyCreationDate.parse(text) else {
                throw .keysFileInvalid(path: keysFile, location: location, problem: "created must be a date written YYYY-MM-DD, such as 2025-06-01")
            }
            created = date
        }
        let format = key.format ?? .passphrase
        let source: KeySource
        if key.plaintext == true {
            source = .plaintext
        } else if let text = key.passphrase {
            source = .passphrase(text)
        } else if let text = key.hex {
            source = .hex(text)
        } else if let text = key.wrappedKey, let kekID = key.wrappedBy {
            // A data key is made by this library, never by SQLCipher 1.x or 2.x.
            if key.legacy == true { throw .keysFileInvalid(path: keysFile, location: location, problem: "a wrapped data key is never legacy") }
            do throws(KeyWrappingProblem) {
                source = .wrapped(try WrappedDataKey(text: text, wrappedBy: kekID))
            } catch {
                throw .keysFileInvalid(path: keysFile, location: location, problem: error.description)
            }
        } else if let name = key.credential {
            source = .credential(name: name, format: format)
        } else if let variable = key.env {
            guard format != .binary else {
                throw .keysFileInvalid(path: keysFile, location: location, problem: "format binary applies to key files only")
            }
            guard Self.isEnvironmentVariableName(variable) else {
                // Never echoed: a key pasted here by mistake must not end up in a message.
                throw .keysFileInvalid(path: keysFile, location: location, problem: "env must be the NAME of an environment variable (letters, digits and _, not starting with a digit; the value given is not shown, in case it is the key itself); put the key in that variable, or use passphrase: or hex: for a key written here")
            }
            source = .environment(variable: variable, format: format)
        } else {
            source = .file(path: Self.absolute(key.file ?? "", base: baseDirectory), format: format)
        }
        return DatabaseKey(id: key.id, source: source, cipher: key.cipher?.settings ?? .engineDefault, legacy: key.legacy ?? false, created: created)
    }

    /// `true` for a portable environment variable name: letters, digits and `_`, not starting with
    /// a digit, and not 64 hex digits (a raw key pasted in the place of a name).
    static func isEnvironmentVariableName(_ name: String) -> Bool {
        let scalars = name.unicodeScalars
        guard let first = scalars.first, !("0"..."9").contains(first) else { return false }
        let valid = scalars.allSatisfy { $0 == "_" || ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) }
        let looksLikeHexKey = scalars.count == 64 && scalars.allSatisfy { ("a"..."f").contains($0) || ("A"..."F").contains($0) || ("0"..."9").contains($0) }
        return valid && !looksLikeHexKey
    }
}
