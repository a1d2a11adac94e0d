import CipherFormats
import Foundation
import Yams

/// A `Keys` file: the key lists of one or more databases, in YAML.
///
/// ```yaml
/// databases:
///   - path: app.sqlite            # relative to the Keys file's folder
///     keys:                       # oldest first; the last is current
///       - id: "2024-01"
///         passphrase: "…"         # or exactly one of: hex, env, file
///       - id: "2025-06"
///         env: APP_DB_KEY_2025_06
///         format: hex             # env and file: passphrase (default), hex, or binary (file only)
/// ```
///
/// Loading checks the shape strictly: unknown fields (usually typos) and keys with no source or
/// several sources are errors. Key material is only read when you ask for a database's
/// ``keyList(forDatabase:environment:)``. Errors never quote the file's text, which may hold secrets.
public struct KeysFile: Sendable {
    /// One database entry of the file.
    ///
    /// ```swift
    /// for entry in keysFile.entries where entry.isPattern {
    ///     print("\(entry.configuredPath) shares one key list")
    /// }
    /// ```
    public struct Entry: Sendable {
        /// The database path as written in the file.
        public let configuredPath: String
        /// The absolute path (relative paths are taken from the Keys file's folder).
        public let path: String
        /// The keys, oldest first.
        public let keys: [DatabaseKey]
        /// `max_key_age_days`: how many days the current key may be used before a new one is due
        /// (`rekey --check` and `rekey status` report an older one), or `nil` for no policy.
        public let maximumKeyAgeDays: Int?

        /// `true` when ``path`` is a glob pattern (`*`, `?` or `[…]`) naming many databases that
        /// share one key list, such as `tenants/*.sqlite`.
        public var isPattern: Bool { KeysFile.isPattern(configuredPath) }
    }

    /// The path the file was read from.
    public let path: String
    /// The `key_encryption_keys:` entries, oldest first (the last wraps new data keys).
    public let keyEncryptionKeyEntries: [KeyEncryptionKeyEntry]
    /// The key-encryption keys, each resolved on its first use and then kept for every database
    /// of this file (one PBKDF2 or token login per KEK per loaded file).
    public let keyEncryptionKeys: KeyEncryptionKeyList
    /// The database entries, in file order.
    public let entries: [Entry]

    /// The largest Keys file read: 64 MiB, so that a fleet of 100,000 databases loads (the Keys
    /// File Reference gives the sizes and the reason).
    public static let maximumSize = 64 << 20

    /// Reads and checks a Keys file.
    ///
    /// The file is read through the same checks as key files (see the Keys File guide): a regular
    /// file (a named pipe or device is refused without blocking), at most ``maximumSize`` bytes,
    /// owned by this user or root, not writable by group or others, in folders others cannot
    /// write; and, when it holds `passphrase:` or `hex:` material, not readable by group or others
    /// (``StrictModes`` turns the owner and mode rules off). Passphrase and hex values go from the
    /// file's bytes straight into zeroed buffers; the bytes read are zeroed before this returns.
    /// - Throws: ``KeyConfigurationError/keysFileMissing(path:)``,
    ///   ``KeyConfigurationError/keysFileUnreadable(path:reason:)``,
    ///   ``KeyConfigurationError/keysFileUntrusted(path:problem:)``,
    ///   ``KeyConfigurationError/keysFileInvalid(path:location:problem:)``,
    ///   ``KeyConfigurationError/unknownField(path:location:field:allowed:)`` or
    ///   ``KeyConfigurationError/keySourceCount(keyID:database:sources:keysFile:)``.
    /// - Parameter externalKeyEncryptionKeys: The KEKs of `external:` entries, by name (a KMS, Vault transit).
    public static func load(path: String, externalKeyEncryptionKeys: [String: any KeyEncryptionKey] = [:]) throws(KeyConfigurationError) -> KeysFile {
        let file: TrustedFile
        do {
            file = try TrustedFile.read(path: path, limit: maximumSize, readableByOthersAllowed: true)
        } catch {
            switch error {
            case .missing: throw .keysFileMissing(path: path)
            case .unreadable(let reason): throw .keysFileUnreadable(path: path, reason: reason)
            case .untrusted(.notARegularFile(let kind)): throw .keysFileUnreadable(path: path, reason: "it is \(kind), not a regular file")
            case .untrusted(let .tooLarge(bytes, limit)): throw .keysFileUnreadable(path: path, reason: "it has \(bytes) bytes, more than the \(limit) a Keys file may have")
            case .untrusted(let problem): throw .keysFileUntrusted(path: path, problem: problem)
            }
        }
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        let keysFile = try KeysFile(bytes: file.bytes, path: path, baseDirectory: folder, external: externalKeyEncryptionKeys)
        if keysFile.holdsMaterial {
            do { try file.requireNotReadableByOthers() } catch { throw .keysFileUntrusted(path: path, problem: error) }
        }
        return keysFile
    }

    /// Parses Keys file text.
    ///
    /// The text's passphrase and hex values are copied into zeroed buffers; the `String` itself
    /// stays yours (``load(path:)`` never makes one).
    /// - Parameters:
    ///   - yaml: The file's text.
    ///   - path: The file's path, for messages.
    ///   - baseDirectory: The folder relative database and key-file paths are taken from.
    /// - Throws: the same errors as ``load(path:)`` except the file-access ones.
    ///   - externalKeyEncryptionKeys: The KEKs of `external:` entries, by name.
    public init(yaml: String, path: String, baseDirectory: String, externalKeyEncryptionKeys: [String: any KeyEncryptionKey] = [:]) throws(KeyConfigurationError) {
        try self.init(bytes: SecretBytes(copying: yaml.utf8), path: path, baseDirectory: baseDirectory, external: externalKeyEncryptionKeys)
    }

    /// Parses a Keys file's bytes (see ``KeysFileSecrets``).
    init(bytes: SecretBytes, path: String, baseDirectory: String, external: [String: any KeyEncryptionKey] = [:]) throws(KeyConfigurationError) {
        var fingerprint = (count: 0, hash: 0)
        // The document is read while the bytes are there: its text and secret values come from them.
        let (document, holdsMaterial) = try bytes.withUnsafeBytes { (raw) throws(KeyConfigurationError) -> (KeysFileDocument, Bool) in
            fingerprint = KeysFileLayout.fingerprint(of: raw)
            let secrets: KeysFileSecrets
            do throws(KeysFileSecrets.Failure) {
                secrets = try KeysFileSecrets(bytes: raw)
            } catch {
                throw .keysFileInvalid(path: path, location: error.location, problem: error.problem)
            }
            do throws(KeyConfigurationError) {
                return (try KeysFileDocument(secrets.root, finder: secrets.finder), secrets.finder.holdsMaterial)
            } catch {
                throw Self.configurationError(decoding: error, path: path)
            }
        }
        self.path = path
        self.holdsMaterial = holdsMaterial
        var kekEntries: [KeyEncryptionKeyEntry] = []
        for (index, kek) in document.keyEncryptionKeys.enumerated() {
            let entry = try Self.keyEncryptionKeyEntry(from: kek, at: index, keysFile: path, baseDirectory: baseDirectory)
            guard !kekEntries.contains(where: { $0.id == entry.id }) else {
                throw .keysFileInvalid(path: path, location: "key_encryption_keys[\(index)]", problem: "key-encryption key id \"\(entry.id)\" appears twice; give every KEK its own id")
            }
            kekEntries.append(entry)
        }
        keyEncryptionKeyEntries = kekEntries
        keyEncryptionKeys = KeyEncryptionKeyList(entries: kekEntries, external: external)
        var layout = document.layout
        layout.fingerprint = fingerprint
        layout.wrappedValues.reserveCapacity(document.databases.count)
        var entries: [Entry] = []
        entries.reserveCapacity(document.databases.count)
        for (index, database) in document.databases.enumerated() {
            guard !database.path.isEmpty else {
                throw .keysFileInvalid(path: path, location: "databases[\(index)].path", problem: "the path is empty")
            }
            let absolute = Self.absolute(database.path, base: baseDirectory)
            var keys: [DatabaseKey] = []
            for key in database.keys {
                keys.append(try Self.databaseKey(from: key, at: index, database: database.path, keysFile: path, baseDirectory: baseDirectory))
            }
            if let days = database.maxKeyAgeDays, days < 1 {
                throw .keysFileInvalid(path: path, location: "databases[\(index)].max_key_age_days", problem: "the maximum key age must be a whole number of days, at least 1")
            }
            entries.append(Entry(configuredPath: database.path, path: absolute, keys: keys, maximumKeyAgeDays: database.maxKeyAgeDays))
            layout.wrappedValues.append(database.keys.map(\.wrappedPlaces))
        }
        self.entries = entries
        self.layout = layout
    }

    /// Where the text that was loaded holds its wrapped values and KEK list (for a master-key
    /// rotation's edit).
    let layout: KeysFileLayout

    /// `true` when the file holds `passphrase:` or `hex:` material.
    let holdsMaterial: Bool

    /// The entry for a database path, compared after making both paths absolute and resolving
    /// symbolic links in their folders.
    ///
    /// One rule for relative paths: `databasePath`, like every path a program is given, is taken
    /// from the current working directory — so it names the same file as
    /// `EncryptedDatabase(path: databasePath, …)` — and the entries' paths are taken from the Keys
    /// file's folder, so the file means the same wherever it is used from.
    /// A path named exactly wins over a glob pattern that also matches it; among patterns, the
    /// first in file order wins.
    public func entry(forDatabase databasePath: String) -> Entry? {
        let wanted = Self.canonical(databasePath)
        let absolute = Self.absolute(databasePath, base: FileManager.default.currentDirectoryPath)
        return entries.first { !$0.isPattern && $0.names(absolute, canonical: wanted) }
            ?? entries.first { $0.isPattern && $0.names(absolute, canonical: wanted) }
    }

    /// Every database the file names, in file order: exact paths as written (whether or not the
    /// file exists), glob patterns expanded to the regular files they match now (sorted, without
    /// this library's temporary files). A path is listed once.
    public func allDatabasePaths() -> [String] {
        var seen = Set<String>()
        var paths: [String] = []
        for entry in entries {
            let matches = entry.isPattern ? Self.expand(entry.path) : [entry.path]
            for path in matches where seen.insert(path).inserted { paths.append(path) }
        }
        return paths
    }

    /// Resolves the key list of one database, found as ``entry(forDatabase:)`` says (a relative
    /// `databasePath` is taken from the current working directory).
    /// - Throws: ``KeyConfigurationError/databaseNotConfigured(database:resolvedPath:keysFile:configured:resolvedConfigured:)``
    ///   when the file has no entry for it (the message shows the path as resolved and every
    ///   entry as resolved), or any error of ``KeyList/init(database:keys:environment:)``.
    public func keyList(forDatabase databasePath: String, environment: [String: String]? = nil) throws(KeyConfigurationError) -> KeyList {
        guard let entry = entry(forDatabase: databasePath) else {
            throw .databaseNotConfigured(
                database: databasePath, resolvedPath: Self.absolute(databasePath, base: FileManager.default.currentDirectoryPath),
                keysFile: path, configured: entries.map(\.configuredPath), resolvedConfigured: entries.map(\.path))
        }
        return try KeyList(database: databasePath, keys: entry.keys, environment: environment, keyEncryptionKeys: keyEncryptionKeys)
    }
}
