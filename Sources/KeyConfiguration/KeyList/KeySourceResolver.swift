import CipherFormats
import Foundation

/// Reads key material from its source.
enum KeySourceResolver {
    /// The largest key file read; a key file is a few dozen bytes.
    static let maximumKeyFileSize = 64 * 1024

    static func resolve(_ key: DatabaseKey, database: String, environment: [String: String]?, keyEncryptionKeys: KeyEncryptionKeyList) throws(KeyConfigurationError) -> KeyMaterial {
        func wrap<T>(_ body: () throws(KeyMaterialProblem) -> T) throws(KeyConfigurationError) -> T {
            do { return try body() } catch { throw .invalidMaterial(keyID: key.id, database: database, source: key.source.description, problem: error) }
        }
        switch key.source {
        case .passphrase(let text):
            return try wrap { () throws(KeyMaterialProblem) in
                try text.bytes.withUnsafeBytes { (bytes) throws(KeyMaterialProblem) in try KeyMaterial.passphrase(bytes: bytes) }
            }
        case .hex(let text):
            return try wrap { () throws(KeyMaterialProblem) in
                try text.bytes.withUnsafeBytes { (bytes) throws(KeyMaterialProblem) in try KeyMaterial.rawKey(hexBytes: bytes) }
            }
        case .material(let material):
            return material
        case .wrapped(let value):
            return try keyEncryptionKeys.unwrap(value, dataKeyID: key.id, database: database, environment: environment).material
        case let .credential(name, format):
            guard let directory = environmentValue("CREDENTIALS_DIRECTORY", in: environment) else {
                throw .credentialsDirectoryUnset(credential: name, keyID: key.id, database: database)
            }
            guard !name.isEmpty, !name.contains("/"), name != ".", name != ".." else {
                throw .credentialNameInvalid(keyID: key.id, database: database)
            }
            let folder = directory.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            return try resolve(DatabaseKey(id: key.id, source: .file(path: folder + "/" + name, format: format)), database: database, environment: environment, keyEncryptionKeys: keyEncryptionKeys)
        case .plaintext:
            preconditionFailure("the plaintext entry has no material; KeyList handles it")
        case let .environment(variable, format):
            guard let value = environmentValue(variable, in: environment) else {
                // A name not in UPPER_CASE may be a key: the error does not hold it (see shownVariableName).
                throw .environmentVariableUnset(variable: KeyConfigurationError.shownVariableName(variable), keyID: key.id, database: database)
            }
            return try wrap { () throws(KeyMaterialProblem) in
                try value.withUnsafeBytes { (bytes) throws(KeyMaterialProblem) in
                    switch format {
                    case .passphrase: return try KeyMaterial.passphrase(bytes: bytes)
                    case .hex: return try KeyMaterial.rawKey(hexBytes: bytes)
                    case .binary: throw KeyMaterialProblem.wrongByteCount(bytes: bytes.count)
                    }
                }
            }
        case let .file(path, format):
            let bytes = try readKeyFile(path: path, keyID: key.id, database: database)
            return try bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(KeyConfigurationError) -> KeyMaterial in
                var content = raw[...]
                if format != .binary {
                    while let last = content.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") {
                        content = content.dropLast()
                    }
                }
                return try wrap { () throws(KeyMaterialProblem) in
                    switch format {
                    case .passphrase: return try KeyMaterial.passphrase(bytes: content)
                    case .hex: return try KeyMaterial.rawKey(hexBytes: content)
                    case .binary: return try KeyMaterial.rawKey(bytes: content)
                    }
                }
            }
        }
    }

    /// The value of `variable` in a zeroed buffer: from `environment` when given, else straight
    /// from the process environment (`getenv`), without a `String` copy.
    static func environmentValue(_ variable: String, in environment: [String: String]?) -> SecretBytes? {
        if let environment {
            return environment[variable].map { SecretBytes(copying: $0.utf8) }
        }
        guard let value = getenv(variable) else { return nil }
        return SecretBytes(copying: UnsafeRawBufferPointer(start: value, count: strlen(value)))
    }

    /// Reads a key file into a secret buffer through ``TrustedFile`` (regular file, opened without
    /// blocking, at most ``maximumKeyFileSize`` bytes, owner and modes as ``StrictModes`` says,
    /// not readable by group or others).
    static func readKeyFile(path: String, keyID: String, database: String) throws(KeyConfigurationError) -> SecretBytes {
        do {
            return try TrustedFile.read(path: path, limit: maximumKeyFileSize, readableByOthersAllowed: false).bytes
        } catch {
            switch error {
            case .missing:
                throw .keyFileUnreadable(path: path, keyID: keyID, database: database, reason: String(cString: strerror(ENOENT)))
            case .unreadable(let reason):
                throw .keyFileUnreadable(path: path, keyID: keyID, database: database, reason: reason)
            case .untrusted(.notARegularFile(let kind)):
                throw .keyFileUnreadable(path: path, keyID: keyID, database: database, reason: "\(kind), not a regular file")
            case .untrusted(.tooLarge(_, let limit)):
                throw .keyFileUnreadable(path: path, keyID: keyID, database: database, reason: "larger than \(limit) bytes; a key file holds one key")
            case .untrusted(.readableByOthers(let mode)):
                throw .keyFileTooPermissive(path: path, mode: mode, keyID: keyID, database: database)
            case .untrusted(let problem):
                throw .keyFileUntrusted(path: path, keyID: keyID, database: database, problem: problem)
            }
        }
    }
}
