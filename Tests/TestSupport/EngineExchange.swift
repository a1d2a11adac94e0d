import EncryptedSQLite
import Foundation

/// Files one engine's test run leaves for the other engine's run: `scripts/test.sh` on Debian 12 runs
/// the suite on SQLCipher 3.4.1, then in a Debian 13 root on SQLCipher 4, then the cross-engine
/// tests on 3.4.1 again, handing each run the folder the one before wrote (`CrossEngineTests`).
/// Every file is in the SQLCipher 3.x format, the one both engines read; a manifest says what each
/// holds and which key opens it (test keys, never real ones).
public enum EngineExchange {
    /// Where this run writes its files: `ENCRYPTEDSQLITE_EXCHANGE_OUT`, or `.build/engine-exchange/out`
    /// in the package (where `scripts/test.sh` and `scripts/sqlcipher4-check.sh` look for them).
    public static var outFolder: String {
        ProcessInfo.processInfo.environment["ENCRYPTEDSQLITE_EXCHANGE_OUT"] ?? SQLCipher4.packageRoot + "/.build/engine-exchange/out"
    }

    /// The folder the other engine's run wrote (`ENCRYPTEDSQLITE_EXCHANGE_IN`), set by `scripts/test.sh`.
    public static var inFolder: String? { ProcessInfo.processInfo.environment["ENCRYPTEDSQLITE_EXCHANGE_IN"] }

    /// The manifest's file name in a folder.
    public static let manifestName = "manifest.json"

    /// What one run wrote.
    public struct Manifest: Codable, Sendable {
        /// `PRAGMA cipher_version` of the library's engine in that run, e.g. `4.6.1 community`.
        public var engine: String
        /// The files.
        public var files: [Entry]

        public init(engine: String, files: [Entry]) {
            self.engine = engine
            self.files = files
        }

        /// The engine's major version (3, 4).
        public var engineMajor: Int { Int(engine.prefix { $0.isNumber }) ?? 0 }
    }

    /// One file: its name in the folder, how it was made, its key, and the fixture rows it holds.
    public struct Entry: Codable, Sendable {
        public var name: String
        public var madeBy: String
        /// `passphrase` or `hex`.
        public var keyKind: String
        public var secret: String
        public var rows: Int

        public init(name: String, madeBy: String, key: ShellKey, rows: Int) {
            self.name = name
            self.madeBy = madeBy
            switch key {
            case .passphrase(let text): (keyKind, secret) = ("passphrase", text)
            case .hex(let digits): (keyKind, secret) = ("hex", digits)
            }
            self.rows = rows
        }

        /// The key as the `sqlcipher` shell takes it.
        public var shellKey: ShellKey { keyKind == "hex" ? .hex(secret) : .passphrase(secret) }

        /// The key as the library takes it, in the 3.x format (``EngineExchange/version3Key(id:_:)``).
        public func databaseKey(id: String) -> DatabaseKey {
            EngineExchange.version3Key(id: id, shellKey)
        }
    }

    /// A key pinned to the SQLCipher 3.x file format (`cipher: sqlcipher3`), which both engines read
    /// and write: what a fleet with SQLCipher 3.4.1 hosts gives its keys.
    public static func version3Key(id: String, _ key: ShellKey) -> DatabaseKey {
        let version3 = CipherSettings(generation: .sqlcipher3)
        return switch key {
        case .passphrase(let text): DatabaseKey(id: id, source: .passphrase(text), cipher: version3)
        case .hex(let digits): DatabaseKey(id: id, source: .hex(digits), cipher: version3)
        }
    }

    /// Writes `manifest` into `folder`.
    public static func write(_ manifest: Manifest, to folder: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(manifest).write(to: URL(fileURLWithPath: folder + "/" + manifestName))
    }

    /// Reads the manifest in `folder`; the error says which run should have written it.
    public static func manifest(in folder: String) throws -> Manifest {
        let path = folder + "/" + manifestName
        guard let data = TestFiles.contents(path) else {
            throw FixtureError(message: "\(path) is missing: the other engine's run (CrossEngineTests in scripts/test.sh) did not write its files")
        }
        return try JSONDecoder().decode(Manifest.self, from: data)
    }
}
