import EncryptedSQLite
import Foundation

/// The kinds of key source a test key can use.
public enum SourceKind: String, Sendable, CaseIterable, CustomStringConvertible {
    case passphrase, hex, envPassphrase, envHex, filePassphrase, fileHex
    public var description: String { rawValue }
}

/// One test key: its id, how the library gets it, and how the `sqlcipher` shell takes it.
public struct TestKey: Sendable {
    public let id: String
    public let kind: SourceKind
    public let key: DatabaseKey
    public let shellKey: ShellKey
    /// The secret as text, to search outputs for.
    public let secret: String
}

/// A list of test keys of chosen source kinds, with the environment and key files they need.
public struct TestKeyring: Sendable {
    public let keys: [TestKey]
    public let environment: [String: String]
    /// The id of a leading `plaintext` entry, when the list has one.
    public let plaintextID: String?

    /// Makes keys `k1`, `k2`, … of the given kinds; key files are written into `directory`. With
    /// `plaintextID`, the list starts with a plaintext entry of that id.
    public init(_ kinds: [SourceKind], in directory: TemporaryDirectory, idPrefix: String = "k", plaintextID: String? = nil) {
        self.plaintextID = plaintextID
        var keys: [TestKey] = []
        var environment: [String: String] = [:]
        for (index, kind) in kinds.enumerated() {
            let id = "\(idPrefix)\(index + 1)"
            let passphrase = TestKeys.passphrase(id)
            let hex = TestKeys.hex()
            let variable = "TEST_DB_KEY_\(UUID().uuidString.prefix(8).uppercased())"
            switch kind {
            case .passphrase:
                keys.append(TestKey(id: id, kind: kind, key: .init(id: id, source: .passphrase(passphrase)), shellKey: .passphrase(passphrase), secret: passphrase))
            case .hex:
                keys.append(TestKey(id: id, kind: kind, key: .init(id: id, source: .hex(hex)), shellKey: .hex(hex), secret: hex))
            case .envPassphrase:
                environment[variable] = passphrase
                keys.append(TestKey(id: id, kind: kind, key: .init(id: id, source: .environment(variable: variable)), shellKey: .passphrase(passphrase), secret: passphrase))
            case .envHex:
                environment[variable] = hex
                keys.append(TestKey(id: id, kind: kind, key: .init(id: id, source: .environment(variable: variable, format: .hex)), shellKey: .hex(hex), secret: hex))
            case .filePassphrase:
                let path = TestKeys.writeKeyFile(passphrase + "\n", in: directory, name: "\(id).key")
                keys.append(TestKey(id: id, kind: kind, key: .init(id: id, source: .file(path: path)), shellKey: .passphrase(passphrase), secret: passphrase))
            case .fileHex:
                let path = TestKeys.writeKeyFile(hex + "\n", in: directory, name: "\(id).key")
                keys.append(TestKey(id: id, kind: kind, key: .init(id: id, source: .file(path: path, format: .hex)), shellKey: .hex(hex), secret: hex))
            }
        }
        self.keys = keys
        self.environment = environment
    }

    /// The library's key list for `database`.
    public func keyList(database: String) throws -> KeyList {
        try KeyList(database: database, keys: (plaintextID.map { [DatabaseKey.plaintext(id: $0)] } ?? []) + keys.map(\.key), environment: environment)
    }

    /// A key list of just one of the keys (to make or read a file with exactly that key).
    public func only(_ index: Int, database: String) throws -> KeyList {
        try KeyList(database: database, keys: [keys[index].key], environment: environment)
    }

    /// The Keys file text for `databasePath` (as written in the file).
    public func yaml(databasePath: String) -> String {
        "databases:\n" + Self.yamlEntry(path: databasePath, plaintextID: plaintextID, keys: keys)
    }

    /// One `databases:` entry of a Keys file.
    public static func yamlEntry(path: String, plaintextID: String?, keys: [TestKey]) -> String {
        var lines = ["  - path: \"\(path)\"", "    keys:"]
        if let plaintextID { lines.append("      - id: \"\(plaintextID)\"\n        plaintext: true") }
        for key in keys {
            lines.append("      - id: \"\(key.id)\"")
            switch key.key.source {
            case .passphrase: lines.append("        passphrase: \"\(key.secret.replacingOccurrences(of: "\"", with: "\\\""))\"")
            case .hex: lines.append("        hex: \(key.secret)")
            case let .environment(variable, format): lines.append("        env: \(variable)\n        format: \(format.rawValue)")
            case let .file(path, format): lines.append("        file: \(path)\n        format: \(format.rawValue)")
            case let .credential(name, format): lines.append("        credential: \(name)\n        format: \(format.rawValue)")
            case .wrapped(let value): lines.append("        wrapped_by: \"\(value.keyEncryptionKeyID)\"\n        wrapped_key: \"\(value.text)\"")
            case .material: break
            case .plaintext: lines.append("        plaintext: true")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
