import CipherFormats

// The YAML shape of a Keys file, decoded strictly: every mapping refuses fields it does not
// know (usually typos). `KeysFile.init(yaml:path:baseDirectory:)` checks the values.

/// A coding key for any field name, to list the fields a mapping has.
private struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// Throws ``KeyConfigurationError/unknownField(path:location:field:allowed:)`` for the first field
/// of `decoder`'s mapping that is not in `allowed` (the path is filled in by
/// ``KeyConfigurationError/locatedIn(_:)``). A field that does not look like a field name is not shown.
private func rejectUnknownFields(in decoder: any Decoder, allowed: [String]) throws {
    let container = try decoder.container(keyedBy: AnyKey.self)
    for key in container.allKeys where !allowed.contains(key.stringValue) {
        throw KeyConfigurationError.unknownField(
            path: "", location: KeysFile.location(of: decoder.codingPath),
            field: KeyConfigurationError.shownFieldName(key.stringValue, allowed: allowed), allowed: allowed)
    }
}

/// The whole file: optionally `key_encryption_keys:`, and `databases:`, a list of database entries.
struct KeysFileDocument: Decodable {
    let keyEncryptionKeys: [KeyEncryptionKeyDocument]
    let databases: [DatabaseDocument]

    private enum CodingKeys: String, CodingKey, CaseIterable { case keyEncryptionKeys = "key_encryption_keys", databases }

    init(from decoder: any Decoder) throws {
        try rejectUnknownFields(in: decoder, allowed: CodingKeys.allCases.map(\.rawValue))
        let container = try decoder.container(keyedBy: CodingKeys.self)
        keyEncryptionKeys = try container.decodeIfPresent([KeyEncryptionKeyDocument].self, forKey: .keyEncryptionKeys) ?? []
        databases = try container.decode([DatabaseDocument].self, forKey: .databases)
    }
}

/// One key-encryption key: its `id`, exactly one source (`passphrase` with `salt`, `hex`, `env`,
/// `file`, `credential`, `pkcs11` or `external`), the `format` of env, file and credential
/// sources, and an optional `created` date.
struct KeyEncryptionKeyDocument: Decodable {
    let id: String
    let passphrase: String?
    let hex: String?
    let env: String?
    let file: String?
    let credential: String?
    let pkcs11: PKCS11Document?
    let external: String?
    let format: KeyFormat?
    let salt: String?
    let created: String?

    private enum CodingKeys: String, CodingKey, CaseIterable { case id, passphrase, hex, env, file, credential, pkcs11, external, format, salt, created }

    init(from decoder: any Decoder) throws {
        try rejectUnknownFields(in: decoder, allowed: CodingKeys.allCases.map(\.rawValue))
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        passphrase = try container.decodeIfPresent(String.self, forKey: .passphrase)
        hex = try container.decodeIfPresent(String.self, forKey: .hex)
        env = try container.decodeIfPresent(String.self, forKey: .env)
        file = try container.decodeIfPresent(String.self, forKey: .file)
        credential = try container.decodeIfPresent(String.self, forKey: .credential)
        pkcs11 = try container.decodeIfPresent(PKCS11Document.self, forKey: .pkcs11)
        external = try container.decodeIfPresent(String.self, forKey: .external)
        format = try container.decodeIfPresent(KeyFormat.self, forKey: .format)
        salt = try container.decodeIfPresent(String.self, forKey: .salt)
        created = try container.decodeIfPresent(String.self, forKey: .created)
    }

    /// The names of the sources this entry gives.
    var presentSources: [String] {
        [("passphrase", passphrase), ("hex", hex), ("env", env), ("file", file), ("credential", credential), ("external", external)]
            .compactMap { $0.1 == nil ? nil : $0.0 } + (pkcs11 == nil ? [] : ["pkcs11"])
    }
}

/// `pkcs11:` on a key-encryption key: the module, the token (`token:` label or `slot:`), the key's
/// label (`key:`) and where the PIN comes from (`pin_env:` or `pin_file:`; a PIN is never written
/// in the Keys file).
struct PKCS11Document: Decodable {
    let module: String
    let token: String?
    let slot: UInt?
    let key: String
    let pinEnv: String?
    let pinFile: String?

    private enum CodingKeys: String, CodingKey, CaseIterable { case module, token, slot, key, pinEnv = "pin_env", pinFile = "pin_file" }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: AnyKey.self)
        if container.allKeys.contains(where: { $0.stringValue == "pin" }) {
            throw KeyConfigurationError.keysFileInvalid(
                path: "", location: KeysFile.location(of: decoder.codingPath),
                problem: "a PIN is never written in the Keys file (its value is not shown); give pin_env: VARIABLE or pin_file: PATH")
        }
        try rejectUnknownFields(in: decoder, allowed: CodingKeys.allCases.map(\.rawValue))
        let fields = try decoder.container(keyedBy: CodingKeys.self)
        module = try fields.decode(String.self, forKey: .module)
        token = try fields.decodeIfPresent(String.self, forKey: .token)
        slot = try fields.decodeIfPresent(UInt.self, forKey: .slot)
        key = try fields.decode(String.self, forKey: .key)
        pinEnv = try fields.decodeIfPresent(String.self, forKey: .pinEnv)
        pinFile = try fields.decodeIfPresent(String.self, forKey: .pinFile)
    }
}

/// One database entry: its `path`, its `keys`, oldest first, and optionally the maximum age of
/// its current key in days.
struct DatabaseDocument: Decodable {
    let path: String
    let keys: [KeyDocument]
    let maxKeyAgeDays: Int?

    private enum CodingKeys: String, CodingKey, CaseIterable { case path, keys, maxKeyAgeDays = "max_key_age_days" }

    init(from decoder: any Decoder) throws {
        try rejectUnknownFields(in: decoder, allowed: CodingKeys.allCases.map(\.rawValue))
        let container = try decoder.container(keyedBy: CodingKeys.self)
        path = try container.decode(String.self, forKey: .path)
        keys = try container.decode([KeyDocument].self, forKey: .keys)
        maxKeyAgeDays = try container.decodeIfPresent(Int.self, forKey: .maxKeyAgeDays)
    }
}

/// One key entry as written: its `id`, its sources (exactly one is valid), their `format`, and
/// optional `cipher` settings, `legacy` flag and `created` date (text, checked by `KeysFile`).
struct KeyDocument: Decodable {
    let id: String
    let passphrase: String?
    let hex: String?
    let env: String?
    let file: String?
    let format: KeyFormat?
    let plaintext: Bool?
    let cipher: CipherDocument?
    let legacy: Bool?
    let created: String?
    let credential: String?
    let wrappedBy: String?
    let wrappedKey: String?

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case id, passphrase, hex, env, file, credential, wrappedBy = "wrapped_by", wrappedKey = "wrapped_key", format, plaintext, cipher, legacy, created
    }

    init(from decoder: any Decoder) throws {
        try rejectUnknownFields(in: decoder, allowed: CodingKeys.allCases.map(\.rawValue))
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        passphrase = try container.decodeIfPresent(String.self, forKey: .passphrase)
        hex = try container.decodeIfPresent(String.self, forKey: .hex)
        env = try container.decodeIfPresent(String.self, forKey: .env)
        file = try container.decodeIfPresent(String.self, forKey: .file)
        format = try container.decodeIfPresent(KeyFormat.self, forKey: .format)
        plaintext = try container.decodeIfPresent(Bool.self, forKey: .plaintext)
        cipher = try container.decodeIfPresent(CipherDocument.self, forKey: .cipher)
        legacy = try container.decodeIfPresent(Bool.self, forKey: .legacy)
        created = try container.decodeIfPresent(String.self, forKey: .created)
        credential = try container.decodeIfPresent(String.self, forKey: .credential)
        wrappedBy = try container.decodeIfPresent(String.self, forKey: .wrappedBy)
        wrappedKey = try container.decodeIfPresent(String.self, forKey: .wrappedKey)
    }

    /// The names of the sources this entry gives (`passphrase`, `hex`, `env`, `file`,
    /// `credential`, `wrapped_key`, `plaintext`).
    var presentSources: [String] {
        [("passphrase", passphrase), ("hex", hex), ("env", env), ("file", file), ("credential", credential), ("wrapped_key", wrappedKey)]
            .compactMap { $0.1 == nil ? nil : $0.0 } + (plaintext == true ? ["plaintext"] : [])
    }
}

/// `cipher:` on a key entry: a generation's name (`cipher: sqlcipher3`), or a mapping of
/// settings, optionally on a generation (`cipher: {compatibility: 3, kdf_iter: 100000}`).
/// Keys.example documents every field.
struct CipherDocument: Decodable {
    let settings: CipherSettings

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case compatibility, kdfIter = "kdf_iter", pageSize = "page_size", useHMAC = "use_hmac"
        case kdfAlgorithm = "kdf_algorithm", hmacAlgorithm = "hmac_algorithm", plaintextHeaderSize = "plaintext_header_size"
        case hmacPageNumber = "hmac_pgno", hmacSaltMask = "hmac_salt_mask", fastKDFIter = "fast_kdf_iter"
    }

    static let generationNames = CipherGeneration.allCases.map(\.name).joined(separator: ", ")

    init(from decoder: any Decoder) throws {
        func invalid(_ problem: String, at key: CodingKeys? = nil) -> KeyConfigurationError {
            .keysFileInvalid(path: "", location: KeysFile.location(of: decoder.codingPath + (key.map { [$0] } ?? [])), problem: problem)
        }
        if let single = try? decoder.singleValueContainer(), let name = try? single.decode(String.self) {
            guard let generation = CipherGeneration(name: name) else {
                throw invalid("cipher must be one of \(Self.generationNames), or a mapping of settings")
            }
            settings = CipherSettings(generation: generation)
            return
        }
        try rejectUnknownFields(in: decoder, allowed: CodingKeys.allCases.map(\.rawValue))
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func digest(_ key: CodingKeys) throws -> CipherDigest? {
            guard let text = try container.decodeIfPresent(String.self, forKey: key) else { return nil }
            guard let digest = CipherDigest(rawValue: text.lowercased()) else {
                throw invalid("\(key.rawValue) must be one of: \(CipherDigest.allCases.map(\.rawValue).joined(separator: ", "))", at: key)
            }
            return digest
        }
        var settings = CipherSettings()
        if let level = try container.decodeIfPresent(Int.self, forKey: .compatibility) {
            guard let generation = CipherGeneration(rawValue: level) else {
                throw invalid("compatibility must be 1, 2, 3 or 4 (the SQLCipher generation whose defaults apply)", at: .compatibility)
            }
            settings.generation = generation
        }
        settings.kdfIterations = try container.decodeIfPresent(Int.self, forKey: .kdfIter)
        settings.pageSize = try container.decodeIfPresent(Int.self, forKey: .pageSize)
        settings.useHMAC = try container.decodeIfPresent(Bool.self, forKey: .useHMAC)
        settings.kdfAlgorithm = try digest(.kdfAlgorithm)
        settings.hmacAlgorithm = try digest(.hmacAlgorithm)
        settings.plaintextHeaderSize = try container.decodeIfPresent(Int.self, forKey: .plaintextHeaderSize)
        if let order = try container.decodeIfPresent(String.self, forKey: .hmacPageNumber) {
            guard let parsed = PageNumberByteOrder(rawValue: order.lowercased()) else {
                throw invalid("hmac_pgno must be le or be", at: .hmacPageNumber)
            }
            settings.hmacPageNumber = parsed
        }
        if let mask = try container.decodeIfPresent(String.self, forKey: .hmacSaltMask) {
            let digits = mask.lowercased().hasPrefix("0x") ? String(mask.dropFirst(2)) : mask
            guard digits.count == 2, let byte = UInt8(digits, radix: 16) else {
                throw invalid("hmac_salt_mask must be one byte in hex, such as \"3a\" or \"0x00\"", at: .hmacSaltMask)
            }
            settings.hmacSaltMask = byte
        }
        settings.fastKDFIterations = try container.decodeIfPresent(Int.self, forKey: .fastKDFIter)
        self.settings = settings
    }
}
