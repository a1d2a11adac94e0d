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
            field: KeyConfigurationError.shownFieldName(key.stringValue), allowed: allowed)
    }
}

/// The whole file: `databases:`, a list of database entries.
struct KeysFileDocument: Decodable {
    let databases: [DatabaseDocument]

    private enum CodingKeys: String, CodingKey, CaseIterable { case databases }

    init(from decoder: any Decoder) throws {
        try rejectUnknownFields(in: decoder, allowed: CodingKeys.allCases.map(\.rawValue))
        let container = try decoder.container(keyedBy: CodingKeys.self)
        databases = try container.decode([DatabaseDocument].self, forKey: .databases)
    }
}

/// One database entry: its `path` and its `keys`, oldest first.
struct DatabaseDocument: Decodable {
    let path: String
    let keys: [KeyDocument]

    private enum CodingKeys: String, CodingKey, CaseIterable { case path, keys }

    init(from decoder: any Decoder) throws {
        try rejectUnknownFields(in: decoder, allowed: CodingKeys.allCases.map(\.rawValue))
        let container = try decoder.container(keyedBy: CodingKeys.self)
        path = try container.decode(String.self, forKey: .path)
        keys = try container.decode([KeyDocument].self, forKey: .keys)
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

    private enum CodingKeys: String, CodingKey, CaseIterable { case id, passphrase, hex, env, file, format, plaintext, cipher, legacy, created }

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
    }

    /// The names of the sources this entry gives (`passphrase`, `hex`, `env`, `file`, `plaintext`).
    var presentSources: [String] {
        [("passphrase", passphrase), ("hex", hex), ("env", env), ("file", file)].compactMap { $0.1 == nil ? nil : $0.0 }
            + (plaintext == true ? ["plaintext"] : [])
    }
}

/// `cipher: {kdf_iter: 4000, page_size: 1024, use_hmac: false}` on a key entry.
struct CipherDocument: Decodable {
    let settings: CipherSettings

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case kdfIter = "kdf_iter", pageSize = "page_size", useHMAC = "use_hmac"
    }

    init(from decoder: any Decoder) throws {
        try rejectUnknownFields(in: decoder, allowed: CodingKeys.allCases.map(\.rawValue))
        let container = try decoder.container(keyedBy: CodingKeys.self)
        settings = CipherSettings(
            kdfIterations: try container.decodeIfPresent(Int.self, forKey: .kdfIter),
            pageSize: try container.decodeIfPresent(Int.self, forKey: .pageSize),
            useHMAC: try container.decodeIfPresent(Bool.self, forKey: .useHMAC))
    }
}
