import CipherFormats
import Yams

// The YAML shape of a Keys file, read strictly from the composed node tree: every mapping refuses
// fields it does not know (usually typos), and every field must have the kind of value it takes.
// `KeysFile.init(yaml:path:baseDirectory:)` checks the values. The tree is walked directly rather
// than through Codable: a fleet's Keys file has tens of thousands of entries, and decoding them
// through Yams's Decoder cost about half of loading one. The fields are read with `FieldReader`
// (KeysFileFields.swift).

/// The whole file: optionally `key_encryption_keys:`, and `databases:`, a list of database entries.
struct KeysFileDocument {
    let keyEncryptionKeys: [KeyEncryptionKeyDocument]
    let databases: [DatabaseDocument]
    /// Where the top-level fields and the KEK list are (the wrapped values' places are on each
    /// ``KeyDocument``).
    private(set) var layout = KeysFileLayout()

    /// Reads the composed document (`nil` for a file with no YAML document in it).
    init(_ root: Node?) throws(KeyConfigurationError) {
        guard let root else {
            throw .keysFileInvalid(path: "", location: "the top level", problem: "the file holds no YAML document")
        }
        let fields = try FieldReader(root, at: DocumentPath(), allowed: ["key_encryption_keys", "databases"])
        var keks: [KeyEncryptionKeyDocument] = []
        if let list = try fields.list("key_encryption_keys") {
            let listPath = fields.path.field("key_encryption_keys")
            for (index, node) in list.enumerated() {
                keks.append(try KeyEncryptionKeyDocument(node, at: listPath.item(index)))
            }
        }
        let list = try fields.requiredList("databases")
        let listPath = fields.path.field("databases")
        var databases: [DatabaseDocument] = []
        databases.reserveCapacity(list.count)
        for (index, node) in list.enumerated() {
            databases.append(try DatabaseDocument(node, at: listPath.item(index)))
        }
        keyEncryptionKeys = keks
        self.databases = databases
        if case .mapping(let mapping) = root {
            layout.topLevelIsBlockMapping = mapping.style != .flow
            for index in mapping.indices {
                let (key, value) = mapping[index]
                guard case .scalar(let name) = key, let mark = name.mark else { continue }
                if name.string == "databases" { layout.databasesKey = (mark.line, mark.column) }
                if name.string == "key_encryption_keys" {
                    layout.keyEncryptionKeysLine = mark.line
                    if case .sequence(let list) = value, list.style != .flow, let listMark = list.mark, let lastMark = list.last?.mark {
                        layout.keyEncryptionKeyList = (listMark.line, listMark.column, lastMark.line)
                    }
                }
            }
        }
    }
}

/// One key-encryption key: its `id`, exactly one source (`passphrase` with `salt`, `hex`, `env`,
/// `file`, `credential`, `pkcs11` or `external`), the `format` of env, file and credential
/// sources, and an optional `created` date.
struct KeyEncryptionKeyDocument {
    let id: String
    let passphrase, hex, env, file, credential, external, salt, created: String?
    let pkcs11: PKCS11Document?
    let format: KeyFormat?

    init(_ node: Node, at path: DocumentPath) throws(KeyConfigurationError) {
        let fields = try FieldReader(node, at: path, allowed: ["id", "passphrase", "hex", "env", "file", "credential", "pkcs11", "external", "format", "salt", "created"])
        id = try fields.requiredString("id")
        passphrase = try fields.string("passphrase")
        hex = try fields.string("hex")
        env = try fields.string("env")
        file = try fields.string("file")
        credential = try fields.string("credential")
        pkcs11 = try fields.node("pkcs11").map { (node) throws(KeyConfigurationError) in try PKCS11Document(node, at: path.field("pkcs11")) }
        external = try fields.string("external")
        format = try fields.format("format")
        salt = try fields.string("salt")
        created = try fields.string("created")
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
struct PKCS11Document {
    let module: String
    let token: String?
    let slot: UInt?
    let key: String
    let pinEnv, pinFile: String?

    init(_ node: Node, at path: DocumentPath) throws(KeyConfigurationError) {
        if node.mapping?.contains(where: { $0.key.scalar?.string == "pin" }) == true {
            throw .keysFileInvalid(path: "", location: path.location, problem: "a PIN is never written in the Keys file (its value is not shown); give pin_env: VARIABLE or pin_file: PATH")
        }
        let fields = try FieldReader(node, at: path, allowed: ["module", "token", "slot", "key", "pin_env", "pin_file"])
        module = try fields.requiredString("module")
        token = try fields.string("token")
        if let number = try fields.int("slot") {
            guard let slot = UInt(exactly: number) else {
                throw .keysFileInvalid(path: "", location: path.field("slot").location, problem: "expected a slot number, 0 or more")
            }
            self.slot = slot
        } else {
            slot = nil
        }
        key = try fields.requiredString("key")
        pinEnv = try fields.string("pin_env")
        pinFile = try fields.string("pin_file")
    }
}

/// One database entry: its `path`, its `keys`, oldest first, and optionally the maximum age of
/// its current key in days.
struct DatabaseDocument {
    let path: String
    let keys: [KeyDocument]
    let maxKeyAgeDays: Int?

    /// The fields a database entry may have (made once, not for each of a fleet's entries).
    static let fields = ["path", "keys", "max_key_age_days"]

    init(_ node: Node, at location: DocumentPath) throws(KeyConfigurationError) {
        let fields = try FieldReader(node, at: location, allowed: Self.fields)
        path = try fields.requiredString("path")
        let list = try fields.requiredList("keys")
        let listPath = location.field("keys")
        var keys: [KeyDocument] = []
        keys.reserveCapacity(list.count)
        for (index, node) in list.enumerated() {
            keys.append(try KeyDocument(node, at: listPath.item(index)))
        }
        self.keys = keys
        maxKeyAgeDays = try fields.int("max_key_age_days")
    }
}

/// One key entry as written: its `id`, its sources (exactly one is valid), their `format`, and
/// optional `cipher` settings, `legacy` flag and `created` date (text, checked by `KeysFile`).
struct KeyDocument {
    let id: String
    let passphrase, hex, env, file, credential, wrappedBy, wrappedKey, created: String?
    let format: KeyFormat?
    let plaintext, legacy: Bool?
    let cipher: CipherDocument?
    /// Where the `wrapped_by:` and `wrapped_key:` values are, when both are scalars.
    let wrappedPlaces: KeysFileLayout.WrappedPlaces?

    /// The fields a key entry may have (made once, not for each of a fleet's keys).
    static let fields = [
        "id", "passphrase", "hex", "env", "file", "credential", "wrapped_by", "wrapped_key", "format", "plaintext", "cipher", "legacy", "created",
    ]

    init(_ node: Node, at path: DocumentPath) throws(KeyConfigurationError) {
        let fields = try FieldReader(node, at: path, allowed: Self.fields)
        id = try fields.requiredString("id")
        passphrase = try fields.string("passphrase")
        hex = try fields.string("hex")
        env = try fields.string("env")
        file = try fields.string("file")
        format = try fields.format("format")
        plaintext = try fields.bool("plaintext")
        cipher = try fields.node("cipher").map { (node) throws(KeyConfigurationError) in try CipherDocument(node, at: path.field("cipher")) }
        legacy = try fields.bool("legacy")
        created = try fields.string("created")
        credential = try fields.string("credential")
        wrappedBy = try fields.string("wrapped_by")
        wrappedKey = try fields.string("wrapped_key")
        if wrappedKey != nil, let by = KeysFileLayout.ScalarPlace(fields.node("wrapped_by")), let key = KeysFileLayout.ScalarPlace(fields.node("wrapped_key")) {
            wrappedPlaces = .init(wrappedBy: by, wrappedKey: key)
        } else {
            wrappedPlaces = nil
        }
    }

    /// The names of the sources this entry gives (`passphrase`, `hex`, `env`, `file`,
    /// `credential`, `wrapped_key`, `plaintext`).
    var presentSources: [String] {
        [("passphrase", passphrase), ("hex", hex), ("env", env), ("file", file), ("credential", credential), ("wrapped_key", wrappedKey)]
            .compactMap { $0.1 == nil ? nil : $0.0 } + (plaintext == true ? ["plaintext"] : [])
    }

    /// How many sources this entry gives: `presentSources.count`, without making the list.
    var presentSourceCount: Int {
        var count = plaintext == true ? 1 : 0
        for source in [passphrase, hex, env, file, credential, wrappedKey] where source != nil { count += 1 }
        return count
    }
}

/// `cipher:` on a key entry: a generation's name (`cipher: sqlcipher3`), or a mapping of
/// settings, optionally on a generation (`cipher: {compatibility: 3, kdf_iter: 100000}`).
/// Keys.example documents every field.
struct CipherDocument {
    let settings: CipherSettings

    static let generationNames = CipherGeneration.allCases.map(\.name).joined(separator: ", ")

    init(_ node: Node, at path: DocumentPath) throws(KeyConfigurationError) {
        func invalid(_ problem: String, at field: String? = nil) -> KeyConfigurationError {
            .keysFileInvalid(path: "", location: (field.map { path.field($0) } ?? path).location, problem: problem)
        }
        if case .scalar(let scalar) = node {
            guard let generation = CipherGeneration(name: scalar.string) else {
                throw invalid("cipher must be one of \(Self.generationNames), or a mapping of settings")
            }
            settings = CipherSettings(generation: generation)
            return
        }
        let fields = try FieldReader(node, at: path, allowed: [
            "compatibility", "kdf_iter", "page_size", "use_hmac", "kdf_algorithm", "hmac_algorithm", "plaintext_header_size",
            "hmac_pgno", "hmac_salt_mask", "fast_kdf_iter",
        ])
        func digest(_ name: String) throws(KeyConfigurationError) -> CipherDigest? {
            guard let text = try fields.string(name) else { return nil }
            guard let digest = CipherDigest(rawValue: text.lowercased()) else {
                throw invalid("\(name) must be one of: \(CipherDigest.allCases.map(\.rawValue).joined(separator: ", "))", at: name)
            }
            return digest
        }
        var settings = CipherSettings()
        if let level = try fields.int("compatibility") {
            guard let generation = CipherGeneration(rawValue: level) else {
                throw invalid("compatibility must be 1, 2, 3 or 4 (the SQLCipher generation whose defaults apply)", at: "compatibility")
            }
            settings.generation = generation
        }
        settings.kdfIterations = try fields.int("kdf_iter")
        settings.pageSize = try fields.int("page_size")
        settings.useHMAC = try fields.bool("use_hmac")
        settings.kdfAlgorithm = try digest("kdf_algorithm")
        settings.hmacAlgorithm = try digest("hmac_algorithm")
        settings.plaintextHeaderSize = try fields.int("plaintext_header_size")
        if let order = try fields.string("hmac_pgno") {
            guard let parsed = PageNumberByteOrder(rawValue: order.lowercased()) else {
                throw invalid("hmac_pgno must be le or be", at: "hmac_pgno")
            }
            settings.hmacPageNumber = parsed
        }
        if let mask = try fields.string("hmac_salt_mask") {
            let digits = mask.lowercased().hasPrefix("0x") ? String(mask.dropFirst(2)) : mask
            guard digits.count == 2, let byte = UInt8(digits, radix: 16) else {
                throw invalid("hmac_salt_mask must be one byte in hex, such as \"3a\" or \"0x00\"", at: "hmac_salt_mask")
            }
            settings.hmacSaltMask = byte
        }
        settings.fastKDFIterations = try fields.int("fast_kdf_iter")
        self.settings = settings
    }
}
