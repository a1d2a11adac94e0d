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
    public struct Entry: Sendable {
        /// The database path as written in the file.
        public let configuredPath: String
        /// The absolute path (relative paths are taken from the Keys file's folder).
        public let path: String
        /// The keys, oldest first.
        public let keys: [DatabaseKey]

        /// `true` when ``path`` is a glob pattern (`*`, `?` or `[…]`) naming many databases that
        /// share one key list, such as `tenants/*.sqlite`.
        public var isPattern: Bool { KeysFile.isPattern(configuredPath) }

        /// `true` when this entry names `absolutePath` (equal path, or matched by the pattern).
        func names(_ absolutePath: String, canonical: String) -> Bool {
            guard isPattern else { return KeysFile.canonical(path) == canonical }
            return fnmatch(path, absolutePath, FNM_PATHNAME) == 0 || fnmatch(path, canonical, FNM_PATHNAME) == 0
        }
    }

    /// The path the file was read from.
    public let path: String
    /// The database entries, in file order.
    public let entries: [Entry]

    /// Reads and checks a Keys file.
    /// - Throws: ``KeyConfigurationError/keysFileMissing(path:)``,
    ///   ``KeyConfigurationError/keysFileUnreadable(path:reason:)``,
    ///   ``KeyConfigurationError/keysFileInvalid(path:location:problem:)``,
    ///   ``KeyConfigurationError/unknownField(path:location:field:allowed:)`` or
    ///   ``KeyConfigurationError/keySourceCount(keyID:database:sources:keysFile:)``.
    public static func load(path: String) throws(KeyConfigurationError) -> KeysFile {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw .keysFileMissing(path: path)
        }
        guard !isDirectory.boolValue else { throw .keysFileUnreadable(path: path, reason: "it is a directory") }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw .keysFileUnreadable(path: path, reason: String(cString: strerror(errno)))
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw .keysFileInvalid(path: path, location: "the file", problem: "it is not UTF-8 text")
        }
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        return try KeysFile(yaml: text, path: path, baseDirectory: folder)
    }

    /// Parses Keys file text.
    /// - Parameters:
    ///   - yaml: The file's text.
    ///   - path: The file's path, for messages.
    ///   - baseDirectory: The folder relative database and key-file paths are taken from.
    /// - Throws: the same errors as ``load(path:)`` except the file-access ones.
    public init(yaml: String, path: String, baseDirectory: String) throws(KeyConfigurationError) {
        let document: KeysFileDocument
        do {
            document = try YAMLDecoder().decode(KeysFileDocument.self, from: yaml)
        } catch let error as KeyConfigurationError {
            throw error.locatedIn(path)
        } catch let error as YamlError {
            throw .keysFileInvalid(path: path, location: Self.location(of: error), problem: Self.problem(of: error))
        } catch let error as DecodingError {
            throw Self.configurationError(from: error, path: path)
        } catch {
            throw .keysFileInvalid(path: path, location: "the file", problem: "it could not be decoded")
        }
        self.path = path
        var entries: [Entry] = []
        for (index, database) in document.databases.enumerated() {
            guard !database.path.isEmpty else {
                throw .keysFileInvalid(path: path, location: "databases[\(index)].path", problem: "the path is empty")
            }
            let absolute = Self.absolute(database.path, base: baseDirectory)
            var keys: [DatabaseKey] = []
            for key in database.keys {
                let sources = key.presentSources
                guard sources.count == 1 else {
                    throw .keySourceCount(keyID: key.id, database: database.path, sources: sources, keysFile: path)
                }
                let location = "databases[\(index)], key \"\(key.id)\""
                if key.format != nil && key.env == nil && key.file == nil {
                    throw .keysFileInvalid(path: path, location: location, problem: "format applies to env and file keys only")
                }
                if key.plaintext == false {
                    throw .keysFileInvalid(path: path, location: location, problem: "plaintext may only be true (leave it out for an encrypted key)")
                }
                if key.plaintext == true && (key.cipher != nil || key.legacy != nil) {
                    throw .keysFileInvalid(path: path, location: location, problem: "a plaintext entry has no cipher settings and is not legacy")
                }
                let format = key.format ?? .passphrase
                let source: KeySource
                if key.plaintext == true {
                    source = .plaintext
                } else if let passphrase = key.passphrase {
                    source = .passphrase(passphrase)
                } else if let hex = key.hex {
                    source = .hex(hex)
                } else if let variable = key.env {
                    guard format != .binary else {
                        throw .keysFileInvalid(path: path, location: "databases[\(index)], key \"\(key.id)\"", problem: "format binary applies to key files only")
                    }
                    guard Self.isEnvironmentVariableName(variable) else {
                        // Never echoed: a key pasted here by mistake must not end up in a message.
                        throw .keysFileInvalid(path: path, location: location, problem: "env must be the NAME of an environment variable (letters, digits and _, not starting with a digit; the value given is not shown, in case it is the key itself); put the key in that variable, or use passphrase: or hex: for a key written here")
                    }
                    source = .environment(variable: variable, format: format)
                } else {
                    source = .file(path: Self.absolute(key.file ?? "", base: baseDirectory), format: format)
                }
                keys.append(DatabaseKey(id: key.id, source: source, cipher: key.cipher?.settings ?? .engineDefault, legacy: key.legacy ?? false))
            }
            entries.append(Entry(configuredPath: database.path, path: absolute, keys: keys))
        }
        self.entries = entries
    }

    /// The entry for a database path, compared after making both paths absolute and resolving
    /// symbolic links in their folders.
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

    /// `true` for a portable environment variable name: letters, digits and `_`, not starting with
    /// a digit, and not 64 hex digits (a raw key pasted in the place of a name).
    static func isEnvironmentVariableName(_ name: String) -> Bool {
        let scalars = name.unicodeScalars
        guard let first = scalars.first, !("0"..."9").contains(first) else { return false }
        let valid = scalars.allSatisfy { $0 == "_" || ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) }
        let looksLikeHexKey = scalars.count == 64 && scalars.allSatisfy { ("a"..."f").contains($0) || ("A"..."F").contains($0) || ("0"..."9").contains($0) }
        return valid && !looksLikeHexKey
    }

    static func isPattern(_ path: String) -> Bool {
        path.contains { $0 == "*" || $0 == "?" || $0 == "[" }
    }

    /// The regular files matching `pattern`, sorted; never hidden files (temporaries start with a dot).
    static func expand(_ pattern: String) -> [String] {
        var result = glob_t()
        defer { globfree(&result) }
        guard glob(pattern, 0, nil, &result) == 0 else { return [] }
        var paths: [String] = []
        for index in 0..<Int(result.gl_pathc) {
            guard let cPath = result.gl_pathv[index] else { continue }
            let path = String(cString: cPath)
            var status = stat()
            guard stat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { continue }
            guard !(path.hasSuffix("-journal") || path.hasSuffix("-wal") || path.hasSuffix("-shm")) else { continue }
            paths.append(path)
        }
        return paths.sorted()
    }

    /// Resolves the key list of one database.
    /// - Throws: ``KeyConfigurationError/databaseNotConfigured(database:keysFile:configured:)``
    ///   when the file has no entry for it, or any error of ``KeyList/init(database:keys:environment:)``.
    public func keyList(forDatabase databasePath: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(KeyConfigurationError) -> KeyList {
        guard let entry = entry(forDatabase: databasePath) else {
            throw .databaseNotConfigured(database: databasePath, keysFile: path, configured: entries.map(\.configuredPath))
        }
        return try KeyList(database: databasePath, keys: entry.keys, environment: environment)
    }

    // MARK: Paths

    static func absolute(_ path: String, base: String) -> String {
        let url = path.hasPrefix("/") ? URL(fileURLWithPath: path) : URL(fileURLWithPath: base).appendingPathComponent(path)
        return url.standardizedFileURL.path
    }

    /// Absolute, standardized, with symbolic links in the folder resolved (the file itself may not exist).
    static func canonical(_ path: String) -> String {
        let absolute = absolute(path, base: FileManager.default.currentDirectoryPath)
        let url = URL(fileURLWithPath: absolute)
        let folder = url.deletingLastPathComponent().path
        guard let resolved = realpath(folder, nil) else { return absolute }
        defer { free(resolved) }
        return URL(fileURLWithPath: String(cString: resolved)).appendingPathComponent(url.lastPathComponent).path
    }

    // MARK: Error translation (never quotes the YAML text)

    private static func location(of error: YamlError) -> String {
        switch error {
        case let .scanner(_, _, mark, _), let .parser(_, _, mark, _), let .composer(_, _, mark, _):
            return "line \(mark.line), column \(mark.column)"
        case let .duplicatedKeysInMapping(_, context):
            return "line \(context.mark.line), column \(context.mark.column)"
        case let .reader(_, offset, _, _):
            return offset.map { "byte \($0)" } ?? "the file"
        default:
            return "the file"
        }
    }

    private static func problem(of error: YamlError) -> String {
        switch error {
        case let .scanner(_, problem, _, _), let .parser(_, problem, _, _), let .composer(_, problem, _, _):
            return "not valid YAML (\(problem))"
        case let .duplicatedKeysInMapping(duplicates, _):
            // Only names that look like field names: a value in the place of a name may be a key.
            let shown = duplicates.map(KeyConfigurationError.shownFieldName)
            return "a field appears twice (\(shown.joined(separator: ", "))); keep one"
        case let .reader(problem, _, _, _):
            return "not readable as YAML (\(problem))"
        default:
            return "not valid YAML"
        }
    }

    private static func configurationError(from error: DecodingError, path: String) -> KeyConfigurationError {
        func render(_ codingPath: [any CodingKey]) -> String {
            var text = ""
            for key in codingPath {
                if let index = key.intValue { text += "[\(index)]" } else { text += text.isEmpty ? key.stringValue : ".\(key.stringValue)" }
            }
            return text.isEmpty ? "the top level" : text
        }
        switch error {
        case let .keyNotFound(key, context):
            return .keysFileInvalid(path: path, location: render(context.codingPath), problem: "the field \"\(key.stringValue)\" is missing")
        case let .typeMismatch(type, context):
            return .keysFileInvalid(path: path, location: render(context.codingPath), problem: "expected \(Self.describe(type))")
        case let .valueNotFound(type, context):
            return .keysFileInvalid(path: path, location: render(context.codingPath), problem: "expected \(Self.describe(type)), found nothing")
        case let .dataCorrupted(context):
            if let own = context.underlyingError as? KeyConfigurationError {
                return own.locatedIn(path)
            }
            if let yaml = context.underlyingError as? YamlError {
                return .keysFileInvalid(path: path, location: location(of: yaml), problem: problem(of: yaml))
            }
            let location = render(context.codingPath)
            if context.codingPath.last?.stringValue == "format" {
                return .keysFileInvalid(path: path, location: location, problem: "format must be one of: \(KeyFormat.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            return .keysFileInvalid(path: path, location: location, problem: "the value is not valid here")
        @unknown default:
            return .keysFileInvalid(path: path, location: "the file", problem: "it could not be decoded")
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "text"
        case is [DatabaseDocument].Type, is [KeyDocument].Type: return "a list"
        default: return "a mapping with the documented fields"
        }
    }
}

extension KeyConfigurationError {
    /// Puts the Keys file's path into errors raised while decoding, which do not know it.
    func locatedIn(_ path: String) -> KeyConfigurationError {
        switch self {
        case let .unknownField(_, location, field, allowed):
            return .unknownField(path: path, location: location, field: field, allowed: allowed)
        case let .keysFileInvalid(_, location, problem):
            return .keysFileInvalid(path: path, location: location, problem: problem)
        default:
            return self
        }
    }
}

// MARK: - The YAML shape

/// Decodes a mapping and refuses fields it does not know.
private struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

private func rejectUnknownFields(in decoder: any Decoder, allowed: [String]) throws {
    let container = try decoder.container(keyedBy: AnyKey.self)
    for key in container.allKeys where !allowed.contains(key.stringValue) {
        var location = ""
        for part in decoder.codingPath {
            if let index = part.intValue { location += "[\(index)]" } else { location += location.isEmpty ? part.stringValue : ".\(part.stringValue)" }
        }
        throw KeyConfigurationError.unknownField(
            path: "", location: location.isEmpty ? "the top level" : location,
            field: KeyConfigurationError.shownFieldName(key.stringValue), allowed: allowed)
    }
}

struct KeysFileDocument: Decodable {
    let databases: [DatabaseDocument]

    private enum CodingKeys: String, CodingKey, CaseIterable { case databases }

    init(from decoder: any Decoder) throws {
        try rejectUnknownFields(in: decoder, allowed: CodingKeys.allCases.map(\.rawValue))
        let container = try decoder.container(keyedBy: CodingKeys.self)
        databases = try container.decode([DatabaseDocument].self, forKey: .databases)
    }
}

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

    private enum CodingKeys: String, CodingKey, CaseIterable { case id, passphrase, hex, env, file, format, plaintext, cipher, legacy }

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
    }

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
