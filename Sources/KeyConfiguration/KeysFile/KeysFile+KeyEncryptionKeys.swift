import CipherFormats
import Foundation

extension KeysFile {
    /// The key-encryption key a `key_encryption_keys:` entry describes, after checking it: exactly
    /// one source, `format` only with `env`, `file` and `credential`, `salt` (32 hex digits) with
    /// passphrases only, an environment variable's name under `env` and `pin_env`.
    /// - Throws: ``KeyConfigurationError/keysFileInvalid(path:location:problem:)``.
    static func keyEncryptionKeyEntry(
        from document: KeyEncryptionKeyDocument, at index: Int, keysFile: String, baseDirectory: String
    ) throws(KeyConfigurationError) -> KeyEncryptionKeyEntry {
        let location = "key_encryption_keys[\(index)], key \"\(document.id)\""
        func invalid(_ problem: String) -> KeyConfigurationError { .keysFileInvalid(path: keysFile, location: location, problem: problem) }
        let sources = document.presentSources
        guard sources.count == 1 else {
            throw invalid(sources.isEmpty
                ? "no source; give exactly one of passphrase (with salt), hex, env, file, credential, pkcs11, external"
                : "several sources (\(sources.joined(separator: ", "))); give exactly one")
        }
        guard !document.id.trimmingCharacters(in: .whitespaces).isEmpty else { throw invalid("the id is empty") }
        if document.format != nil && document.env == nil && document.file == nil && document.credential == nil {
            throw invalid("format applies to env, file and credential sources only")
        }
        var salt: [UInt8]?
        if let text = document.salt {
            guard document.pkcs11 == nil, document.external == nil, document.hex == nil else {
                throw invalid("salt applies to passphrase key-encryption keys only")
            }
            guard text.utf8.count == 2 * LocalKeyEncryptionKey.saltSize, let bytes = Hex.bytes(text) else {
                throw invalid("salt must be \(2 * LocalKeyEncryptionKey.saltSize) hex digits (16 random bytes, e.g. from `openssl rand -hex 16`)")
            }
            salt = bytes
        }
        var created: Date?
        if let text = document.created {
            guard let date = KeyCreationDate.parse(text) else { throw invalid("created must be a date written YYYY-MM-DD, such as 2025-06-01") }
            created = date
        }
        let format = document.format ?? .passphrase
        let source: KeyEncryptionKeySource
        if let text = document.passphrase {
            if salt == nil { throw invalid(KeyWrappingProblem.saltNeeded.description) }
            source = .local(.passphrase(text), salt: salt)
        } else if let text = document.hex {
            source = .local(.hex(text), salt: salt)
        } else if let variable = document.env {
            guard isEnvironmentVariableName(variable) else {
                throw invalid("env must be the NAME of an environment variable (the value given is not shown, in case it is the key itself)")
            }
            guard format != .binary else { throw invalid("format binary applies to files and credentials only") }
            source = .local(.environment(variable: variable, format: format), salt: salt)
        } else if let path = document.file {
            source = .local(.file(path: absolute(path, base: baseDirectory), format: format), salt: salt)
        } else if let name = document.credential {
            source = .local(.credential(name: name, format: format), salt: salt)
        } else if let name = document.external {
            source = .external(name: name)
        } else if let pkcs11 = document.pkcs11 {
            let pin: PKCS11KeyReference.PINSource
            switch (pkcs11.pinEnv, pkcs11.pinFile) {
            case let (variable?, nil):
                guard isEnvironmentVariableName(variable) else { throw invalid("pin_env must be the NAME of an environment variable (the value given is not shown)") }
                pin = .environment(variable)
            case let (nil, path?):
                pin = .file(absolute(path, base: baseDirectory))
            default:
                throw invalid("pkcs11 needs exactly one of pin_env or pin_file (a PIN is never written in the Keys file)")
            }
            if pkcs11.token != nil && pkcs11.slot != nil { throw invalid("pkcs11 names the token by token: (its label) or slot:, not both") }
            source = .pkcs11(PKCS11KeyReference(
                module: absolute(pkcs11.module, base: baseDirectory), tokenLabel: pkcs11.token, slot: pkcs11.slot, keyLabel: pkcs11.key, pin: pin))
        } else {
            throw invalid("no source")
        }
        if salt != nil, case .local(let inner, _) = source, !inner.isReadAsPassphrase {
            throw invalid("salt applies to passphrase key-encryption keys only")
        }
        if case .local(let inner, nil) = source, inner.isReadAsPassphrase {
            throw invalid(KeyWrappingProblem.saltNeeded.description)
        }
        return KeyEncryptionKeyEntry(id: document.id, source: source, created: created)
    }
}
