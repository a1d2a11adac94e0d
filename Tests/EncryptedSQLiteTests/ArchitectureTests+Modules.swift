import Foundation

// The module-level checks of ArchitectureTests: only SQLCipherConnection reaches SQLite's C API,
// and every target imports only what Package.swift declares for it.

extension ArchitectureTests {
    static let manifest = repository + "/Package.swift"
    /// The one target that may call `sqlite3_*` functions and import `CSQLCipher`.
    static let connectionTarget = "SQLCipherConnection"
    /// Modules of the toolchain and the system, which no manifest declares.
    static let systemModules: Set<String> = [
        "Foundation", "FoundationEssentials", "FoundationNetworking", "Glibc", "Musl", "Darwin", "Dispatch", "Synchronization", "Testing",
    ]

    // MARK: The one path to SQLite

    /// Every call of a `sqlite3_…` function and every `import CSQLCipher` in `text` (comments,
    /// doc comments and string literals do not count), one message per line.
    static func sqliteUses(path: String, text: String) -> [String] {
        var messages: [String] = []
        for (index, line) in codeOnly(text).split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if importedModule(String(line)) == "CSQLCipher" {
                messages.append("\(path):\(index + 1) imports CSQLCipher: only \(connectionTarget) may (put the call behind an API there)")
            }
            if let call = sqliteCall(in: String(line)) {
                messages.append("\(path):\(index + 1) calls \(call): only \(connectionTarget) calls SQLite's C API (put the call behind an API there)")
            }
        }
        return messages
    }

    /// The first `sqlite3_name(` call on a line of code, or `nil`.
    private static func sqliteCall(in line: String) -> String? {
        let characters = Array(line)
        let prefix = Array("sqlite3_")
        var index = 0
        while index + prefix.count <= characters.count {
            defer { index += 1 }
            guard Array(characters[index..<index + prefix.count]) == prefix else { continue }
            if index > 0, isIdentifier(characters[index - 1]) { continue }
            var end = index + prefix.count
            while end < characters.count, isIdentifier(characters[end]) { end += 1 }
            var next = end
            while next < characters.count, characters[next] == " " { next += 1 }
            if next < characters.count, characters[next] == "(" { return String(characters[index..<end]) }
        }
        return nil
    }

    private static func isIdentifier(_ character: Character) -> Bool {
        character.isLetter || character.isNumber || character == "_"
    }

    // MARK: Imports against Package.swift

    /// One target of the manifest: its name, the folder of its sources and what it may import.
    struct DeclaredTarget: Equatable {
        let name: String
        let folder: String
        /// Its dependencies as modules: targets, and products by name (`-` written `_`).
        let dependencies: Set<String>
        let isTest: Bool
    }

    /// The targets of a manifest, read simply: each `.target(`, `.executableTarget(`, `.testTarget(`
    /// or `.systemLibrary(` up to the next one, its `name:`, `path:` and the strings of its
    /// `dependencies: […]` (a product's `package:` is not a module).
    static func declaredTargets(inManifest text: String) -> [DeclaredTarget] {
        let code = text.split(separator: "\n", omittingEmptySubsequences: false).map { withoutComment(String($0)) }.joined(separator: "\n")
        let kinds = [".target(", ".executableTarget(", ".testTarget(", ".systemLibrary(", ".binaryTarget(", ".plugin(", ".macro("]
        var starts: [(index: String.Index, kind: String)] = []
        for kind in kinds {
            var from = code.startIndex
            while let range = code.range(of: kind, range: from..<code.endIndex) {
                // A declaration starts its line; `.target(name:)` inside a dependency list does not.
                let lineStart = code[..<range.lowerBound].lastIndex(of: "\n").map { code.index(after: $0) } ?? code.startIndex
                if code[lineStart..<range.lowerBound].allSatisfy(\.isWhitespace) { starts.append((range.lowerBound, kind)) }
                from = range.upperBound
            }
        }
        starts.sort { $0.index < $1.index }
        var targets: [DeclaredTarget] = []
        for (position, start) in starts.enumerated() {
            let end = position + 1 < starts.count ? starts[position + 1].index : code.endIndex
            let chunk = String(code[start.index..<end])
            guard let name = stringArgument("name", in: chunk) else { continue }
            let isTest = start.kind == ".testTarget("
            let folder = stringArgument("path", in: chunk) ?? ((isTest ? "Tests/" : "Sources/") + name)
            var dependencies: Set<String> = []
            if let list = chunk.range(of: "dependencies: [") {
                var depth = 1
                var listEnd = list.upperBound
                while listEnd < chunk.endIndex, depth > 0 {
                    if chunk[listEnd] == "[" { depth += 1 } else if chunk[listEnd] == "]" { depth -= 1 }
                    listEnd = chunk.index(after: listEnd)
                }
                var entries = String(chunk[list.upperBound..<listEnd])
                while let package = entries.range(of: #"package:\s*"[^"]*""#, options: .regularExpression) { entries.removeSubrange(package) }
                dependencies = Set(strings(in: entries).map { $0.replacingOccurrences(of: "-", with: "_") })
            }
            targets.append(DeclaredTarget(name: name, folder: folder, dependencies: dependencies, isTest: isTest))
        }
        return targets
    }

    /// The imports of `files` (path and text) that are neither a declared dependency of `target`,
    /// the target itself, nor a system module; one message per file and module.
    static func undeclaredImports(target: DeclaredTarget, files: [(path: String, text: String)]) -> [String] {
        var messages: [String] = []
        for file in files {
            var seen: Set<String> = []
            for (index, line) in codeOnly(file.text).split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                guard let module = importedModule(String(line)), !seen.contains(module) else { continue }
                seen.insert(module)
                if module == target.name || systemModules.contains(module) || target.dependencies.contains(module) { continue }
                messages.append("\(file.path):\(index + 1) imports \(module), which target \(target.name) does not declare in Package.swift: add it to its dependencies")
            }
        }
        return messages
    }

    /// The module a line of code imports (`import X`, `@_exported import X.Y`,
    /// `package import struct X.Y`), or `nil`.
    static func importedModule(_ line: String) -> String? {
        var tokens = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        let modifiers: Set<String> = ["public", "package", "internal", "private", "fileprivate", "open"]
        while let first = tokens.first, first.hasPrefix("@") || modifiers.contains(first) { tokens.removeFirst() }
        guard tokens.first == "import", tokens.count >= 2 else { return nil }
        let kinds: Set<String> = ["struct", "class", "enum", "protocol", "typealias", "func", "var", "let"]
        let path = kinds.contains(tokens[1]) && tokens.count >= 3 ? tokens[2] : tokens[1]
        return path.split(separator: ".").first.map(String.init)
    }

    /// A manifest line without its `//` comment (one outside a string literal).
    private static func withoutComment(_ line: String) -> String {
        var inString = false
        var previous: Character = " "
        for index in line.indices {
            let character = line[index]
            if character == "\"" { inString.toggle() }
            if !inString, character == "/", previous == "/" { return String(line[..<line.index(before: index)]) }
            previous = character
        }
        return line
    }

    /// The value of the first `label: "…"` argument in `text`.
    private static func stringArgument(_ label: String, in text: String) -> String? {
        guard let range = text.range(of: label + #":\s*"[^"]*""#, options: .regularExpression) else { return nil }
        return strings(in: String(text[range])).first
    }

    /// The string literals of `text`, which has no escaped quotes.
    private static func strings(in text: String) -> [String] {
        text.split(separator: "\"", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
    }
}
