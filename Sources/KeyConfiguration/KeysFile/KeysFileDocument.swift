import CipherFormats
import Yams

// The YAML shape of a Keys file, read strictly from the node tree composed from its masked copy
// (KeysFileSecrets): every mapping refuses fields it does not know (usually typos), and every field
// must have the kind of value it takes. `KeysFile.init(yaml:path:baseDirectory:)` checks the values.
// The tree is walked once, directly rather than through Codable (a fleet's Keys file has tens of
// thousands of entries): each value's text, or a secret value's bytes, is read from the file where
// the document reads it. The fields are read with `FieldReader` (KeysFileFields.swift).

/// The whole file: optionally `key_encryption_keys:`, and `databases:`, a list of database entries.
struct KeysFileDocument {
    let keyEncryptionKeys: [KeyEncryptionKeyDocument]
    let databases: [DatabaseDocument]
    /// Where the top-level fields and the KEK list are (the wrapped values' places are on each
    /// ``KeyDocument``).
    private(set) var layout = KeysFileLayout()

    /// Reads the composed document (`nil` for a file with no YAML document in it) through
    /// `finder`, which reads the text and secret values from the file.
    init(_ root: Node?, finder: Finder) throws(KeyConfigurationError) {
        guard let root else {
            throw .keysFileInvalid(path: "", location: "the top level", problem: "the file holds no YAML document")
        }
        let fields = try FieldReader(root, at: DocumentPath(), allowed: ["key_encryption_keys", "databases"], finder: finder, inFlow: false)
        var keks: [KeyEncryptionKeyDocument] = []
        if let list = try fields.list("key_encryption_keys") {
            let listPath = fields.path.field("key_encryption_keys")
            for (index, node) in list.items.enumerated() {
                keks.append(try KeyEncryptionKeyDocument(FieldReader(node, at: listPath.item(index), allowed: KeyEncryptionKeyDocument.fields, finder: finder, inFlow: list.inFlow)))
            }
        }
        let list = try fields.requiredList("databases")
        let listPath = fields.path.field("databases")
        var databases: [DatabaseDocument] = []
        databases.reserveCapacity(list.items.count)
        for (index, node) in list.items.enumerated() {
            databases.append(try DatabaseDocument(FieldReader(node, at: listPath.item(index), allowed: DatabaseDocument.fields, finder: finder, inFlow: list.inFlow)))
        }
        keyEncryptionKeys = keks
        self.databases = databases
        layout.topLevelIsBlockMapping = !fields.isFlowMapping
        if let mark = fields.nameMark("databases") { layout.databasesKey = (mark.line, mark.column) }
        if let mark = fields.nameMark("key_encryption_keys") {
            layout.keyEncryptionKeysLine = mark.line
            if case .sequence(let list)? = fields.node("key_encryption_keys"), list.style != .flow, let listMark = list.mark, let lastMark = list.last?.mark {
                layout.keyEncryptionKeyList = (listMark.line, listMark.column, lastMark.line)
            }
        }
    }
}

/// One key-encryption key: its `id`, exactly one source (`passphrase` with `salt`, `hex`, `env`,
/// `file`, `credential`, `pkcs11` or `external`), the `format` of env, file and credential
/// sources, and an optional `created` date.
struct KeyEncryptionKeyDocument {
    let id: String
    /// Key material, read from the file's bytes.
    let passphrase, hex: KeyText?
    let env, file, credential, external, salt, created: String?
    let pkcs11: PKCS11Document?
    let format: KeyFormat?

    /// The fields a key-encryption key entry may have.
    static let fields = ["id", "passphrase", "hex", "env", "file", "credential", "pkcs11", "external", "format", "salt", "created"]

    /// Reads the entry whose mapping `fields` reads (made with this type's ``fields``).
    init(_ fields: FieldReader) throws(KeyConfigurationError) {
        let path = fields.path
        id = try fields.requiredString("id")
        passphrase = try fields.secret("passphrase")
        hex = try fields.secret("hex")
        env = try fields.string("env")
        file = try fields.string("file")
        credential = try fields.string("credential")
        pkcs11 = try fields.node("pkcs11").map { (node) throws(KeyConfigurationError) in try PKCS11Document(node, at: path.field("pkcs11"), in: fields) }
        external = try fields.string("external")
        format = try fields.format("format")
        salt = try fields.string("salt")
        created = try fields.string("created")
    }

    /// The names of the sources this entry gives.
    var presentSources: [String] {
        [("passphrase", passphrase != nil), ("hex", hex != nil), ("env", env != nil), ("file", file != nil), ("credential", credential != nil),
         ("external", external != nil), ("pkcs11", pkcs11 != nil)]
            .compactMap { $0.1 ? $0.0 : nil }
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

    /// Reads `node`, the value of field `pkcs11` of the mapping `parent` reads.
    init(_ node: Node, at path: DocumentPath, in parent: FieldReader) throws(KeyConfigurationError) {
        if try parent.mapping(node, hasField: "pin") {
            throw .keysFileInvalid(path: "", location: path.location, problem: "a PIN is never written in the Keys file (its value is not shown); give pin_env: VARIABLE or pin_file: PATH")
        }
        let fields = try FieldReader(node, at: path, allowed: ["module", "token", "slot", "key", "pin_env", "pin_file"], finder: parent.finder, inFlow: parent.inFlow)
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

    /// Reads the entry whose mapping `fields` reads (made with this type's ``fields``).
    init(_ fields: FieldReader) throws(KeyConfigurationError) {
        path = try fields.requiredString("path")
        let list = try fields.requiredList("keys")
        let listPath = fields.path.field("keys")
        var keys: [KeyDocument] = []
        keys.reserveCapacity(list.items.count)
        for (index, node) in list.items.enumerated() {
            keys.append(try KeyDocument(FieldReader(node, at: listPath.item(index), allowed: KeyDocument.fields, finder: fields.finder, inFlow: list.inFlow)))
        }
        self.keys = keys
        maxKeyAgeDays = try fields.int("max_key_age_days")
    }
}

/// One key entry as written: its `id`, its sources (exactly one is valid), their `format`, and
/// optional `cipher` settings, `legacy` flag and `created` date (text, checked by `KeysFile`).
struct KeyDocument {
    let id: String
    /// Key material, read from the file's bytes.
    let passphrase, hex: KeyText?
    let env, file, credential, wrappedBy, wrappedKey, created: String?
    let format: KeyFormat?
    let plaintext, legacy: Bool?
    let cipher: CipherDocument?
    /// Where the `wrapped_by:` and `wrapped_key:` values are, when both are scalars.
    let wrappedPlaces: KeysFileLayout.WrappedPlaces?

    /// The fields a key entry may have (made once, not for each of a fleet's keys).
    static let fields = [
        "id", "passphrase", "hex", "env", "file", "credential", "wrapped_by", "wrapped_key", "format", "plaintext", "cipher", "legacy", "created",
    ]

    /// Reads the entry whose mapping `fields` reads (made with this type's ``fields``).
    init(_ fields: FieldReader) throws(KeyConfigurationError) {
        let path = fields.path
        id = try fields.requiredString("id")
        passphrase = try fields.secret("passphrase")
        hex = try fields.secret("hex")
        env = try fields.string("env")
        file = try fields.string("file")
        format = try fields.format("format")
        plaintext = try fields.bool("plaintext")
        cipher = try fields.node("cipher").map { (node) throws(KeyConfigurationError) in try CipherDocument(node, at: path.field("cipher"), in: fields) }
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
        [("passphrase", passphrase != nil), ("hex", hex != nil), ("env", env != nil), ("file", file != nil), ("credential", credential != nil),
         ("wrapped_key", wrappedKey != nil), ("plaintext", plaintext == true)]
            .compactMap { $0.1 ? $0.0 : nil }
    }

    /// How many sources this entry gives: `presentSources.count`, without making the list.
    var presentSourceCount: Int {
        var count = plaintext == true ? 1 : 0
        for present in [passphrase != nil, hex != nil, env != nil, file != nil, credential != nil, wrappedKey != nil] where present { count += 1 }
        return count
    }
}

/// `cipher:` on a key entry: a generation's name (`cipher: sqlcipher3`), or a mapping of
/// settings, optionally on a generation (`cipher: {compatibility: 3, kdf_iter: 100000}`).
/// Keys.example documents every field.
struct CipherDocument {
    let settings: CipherSettings

    static let generationNames = CipherGeneration.allCases.map(\.name).joined(separator: ", ")

    /// Reads `node`, the value of field `cipher` of the mapping `parent` reads.
    init(_ node: Node, at path: DocumentPath, in parent: FieldReader) throws(KeyConfigurationError) {
        func invalid(_ problem: String, at field: String? = nil) -> KeyConfigurationError {
            .keysFileInvalid(path: "", location: (field.map { path.field($0) } ?? path).location, problem: problem)
        }
        if case .scalar(let scalar) = node {
            guard let generation = CipherGeneration(name: try parent.text(of: scalar)) else {
                throw invalid("cipher must be one of \(Self.generationNames), or a mapping of settings")
            }
            settings = CipherSettings(generation: generation)
            return
        }
        let fields = try FieldReader(node, at: path, allowed: [
            "compatibility", "kdf_iter", "page_size", "use_hmac", "kdf_algorithm", "hmac_algorithm", "plaintext_header_size",
            "hmac_pgno", "hmac_salt_mask", "fast_kdf_iter",
        ], finder: parent.finder, inFlow: parent.inFlow)
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
