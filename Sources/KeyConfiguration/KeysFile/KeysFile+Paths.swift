import DurableFiles
import Foundation

extension KeysFile.Entry {
    /// `true` when this entry names `absolutePath`, whose ``KeysFile/canonical(_:)`` form is
    /// `canonical` (equal path, or matched by the pattern).
    func names(_ absolutePath: String, canonical: String) -> Bool {
        guard isPattern else { return KeysFile.canonical(path) == canonical }
        return fnmatch(path, absolutePath, FNM_PATHNAME) == 0 || fnmatch(path, canonical, FNM_PATHNAME) == 0
    }
}

extension KeysFile {
    /// `true` when `path` is a glob pattern: it holds `*`, `?` or `[`.
    static func isPattern(_ path: String) -> Bool {
        path.contains { $0 == "*" || $0 == "?" || $0 == "[" }
    }

    /// The one file a database entry written as `configuredPath` names, taken as an entry of the
    /// Keys file at `keysFilePath` takes it (a relative path from that file's folder, absolute and
    /// standardized); `nil` when the entry is a pattern (it names many files).
    package static func databasePath(ofEntry configuredPath: String, inKeysFileAt keysFilePath: String) -> String? {
        guard !isPattern(configuredPath) else { return nil }
        return absolute(configuredPath, base: URL(fileURLWithPath: keysFilePath).deletingLastPathComponent().path)
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
            guard !(path.hasSuffix("-journal") || path.hasSuffix("-wal") || path.hasSuffix("-shm") || path.hasSuffix(StepAsideLock.suffix)) else { continue }
            paths.append(path)
        }
        return paths.sorted()
    }

    /// The regular files matching the absolute glob `pattern` now, sorted; hidden files
    /// (temporaries), SQLite side files and step-aside lock files are left out, as for an entry's pattern.
    package static func expandPattern(_ pattern: String) -> [String] {
        expand(pattern)
    }

    /// `path` made absolute against `base` when relative, and standardized (`.` and `..` removed).
    static func absolute(_ path: String, base: String) -> String {
        if let joined = plainJoin(path, base: base) { return joined }
        let url = path.hasPrefix("/") ? URL(fileURLWithPath: path) : URL(fileURLWithPath: base).appendingPathComponent(path)
        return url.standardizedFileURL.path
    }

    /// `base/path` when neither needs standardizing: `base` absolute and `path` relative, both
    /// made of names of letters, digits and `.`, `_`, `-`, `+` only, none empty, `.` or `..`.
    /// Then it is what `URL` gives without its cost (a `stat` of `base`, URL parsing), which a
    /// fleet's Keys file would pay for each of its entries; `nil` otherwise.
    static func plainJoin(_ path: String, base: String) -> String? {
        func plainNames(_ text: Substring.UTF8View) -> Bool {
            var length = 0
            var dots = 0
            for byte in text {
                if byte == UInt8(ascii: "/") {
                    guard length > 0, dots < length || length > 2 else { return false }
                    length = 0
                    dots = 0
                    continue
                }
                let plain = (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                    || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
                    || byte == UInt8(ascii: "+") || byte == UInt8(ascii: ".")
                guard plain else { return false }
                length += 1
                if byte == UInt8(ascii: ".") { dots += 1 }
            }
            return length > 0 && (dots < length || length > 2)
        }
        guard let first = path.utf8.first, first != UInt8(ascii: "/"), plainNames(Substring(path).utf8) else { return nil }
        if base == "/" { return "/" + path }
        guard base.utf8.first == UInt8(ascii: "/"), plainNames(Substring(base).utf8.dropFirst()) else { return nil }
        return base + "/" + path
    }

    /// Absolute, standardized, with symbolic links in the folder resolved (the file itself may not exist).
    package static func canonical(_ path: String) -> String {
        let absolute = absolute(path, base: FileManager.default.currentDirectoryPath)
        let url = URL(fileURLWithPath: absolute)
        let folder = url.deletingLastPathComponent().path
        guard let resolved = realpath(folder, nil) else { return absolute }
        defer { free(resolved) }
        return URL(fileURLWithPath: String(cString: resolved)).appendingPathComponent(url.lastPathComponent).path
    }
}

extension KeysFile {
    /// The entries by canonical path, made once for looking up many databases (a fleet): each
    /// exact entry's path is resolved once, not once per database looked up.
    package struct EntryLookup: Sendable {
        /// The first exact entry naming each canonical path, by index.
        let exact: [String: Int]
        /// The indexes of the pattern entries, in file order.
        let patterns: [Int]
    }

    /// A lookup of this file's entries as they resolve now.
    package func entryLookup() -> EntryLookup {
        var exact: [String: Int] = [:]
        var patterns: [Int] = []
        for (index, entry) in entries.enumerated() {
            if entry.isPattern {
                patterns.append(index)
            } else {
                let key = Self.canonical(entry.path)
                if exact[key] == nil { exact[key] = index }
            }
        }
        return EntryLookup(exact: exact, patterns: patterns)
    }

    /// The entry for `databasePath`, as ``entry(forDatabase:)`` finds it, through `lookup`.
    package func entry(forDatabase databasePath: String, lookup: EntryLookup) -> Entry? {
        let wanted = Self.canonical(databasePath)
        if let index = lookup.exact[wanted] { return entries[index] }
        let absolute = Self.absolute(databasePath, base: FileManager.default.currentDirectoryPath)
        return lookup.patterns.lazy.map { entries[$0] }.first { $0.names(absolute, canonical: wanted) }
    }

    /// The key list of `databasePath`, as ``keyList(forDatabase:environment:)`` builds it, with the
    /// entry found through `lookup`.
    package func keyList(forDatabase databasePath: String, environment: [String: String]? = nil, lookup: EntryLookup) throws(KeyConfigurationError) -> (KeyList, Entry) {
        guard let entry = entry(forDatabase: databasePath, lookup: lookup) else {
            return (try keyList(forDatabase: databasePath, environment: environment), entries[0])
        }
        return (try KeyList(database: databasePath, keys: entry.keys, environment: environment, keyEncryptionKeys: keyEncryptionKeys), entry)
    }
}
