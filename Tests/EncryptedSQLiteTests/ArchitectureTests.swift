import Foundation
import Testing

/// Checks the shape of the source tree that the compiler does not: file sizes, the one-way order
/// of the folders inside the EncryptedSQLite module, which the Architecture article states, that only
/// SQLCipherConnection reaches SQLite's C API, and that every target imports only what it declares.
@Suite("Architecture: source file sizes, the folder order of the Architecture article, and the one path to SQLite")
struct ArchitectureTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    static let sources = repository + "/Sources"
    static let module = sources + "/EncryptedSQLite"
    static let article = module + "/EncryptedSQLite.docc/Architecture.md"
    static let maximumLines = 400

    // MARK: The checks on the tree

    @Test("every .swift file under Sources/ has at most 400 lines")
    func fileSizes() throws {
        var tooLong: [String] = []
        for path in try Self.swiftFiles(under: Self.sources) {
            let lines = Self.lineCount(try String(contentsOfFile: path, encoding: .utf8))
            if lines > Self.maximumLines { tooLong.append("\(Self.relative(path)) has \(lines) lines (at most \(Self.maximumLines)): split it") }
        }
        for message in tooLong { Issue.record(Comment(rawValue: message)) }
    }

    @Test("the folders of Sources/EncryptedSQLite use only folders above them in the Architecture article's table")
    func folderOrder() throws {
        let order = try Self.folderOrder(inArticle: String(contentsOfFile: Self.article, encoding: .utf8))
        #expect(!order.isEmpty, "no folder order found in \(Self.relative(Self.article)) (its table under \"### Inside the top module\")")
        let files = try Self.swiftFiles(under: Self.module).map { path in
            SourceFile(path: Self.relative(path), folder: Self.folder(of: path), text: try String(contentsOfFile: path, encoding: .utf8))
        }
        let present = Set(files.compactMap(\.folder))
        let unlisted = present.subtracting(order).sorted()
        let missing = Set(order).subtracting(present).sorted()
        #expect(unlisted.isEmpty, "folders not in the Architecture article's table (give each a row where it belongs): \(unlisted.map { $0 + "/" })")
        #expect(missing.isEmpty, "the Architecture article's table lists folders with no Swift file: \(missing.map { $0 + "/" })")
        for file in files where file.folder == nil {
            #expect(Self.declaredTypes(in: file.text).isEmpty, "\(file.path) declares types outside any folder: move them into the folder that owns them")
        }
        for violation in Self.violations(order: order, files: files) { Issue.record(Comment(rawValue: violation)) }
    }

    @Test("only SQLCipherConnection calls sqlite3_* functions or imports CSQLCipher: the one path to SQLite")
    func onePathToSQLite() throws {
        for path in try Self.swiftFiles(under: Self.sources) where !path.hasPrefix(Self.sources + "/" + Self.connectionTarget + "/") {
            for use in Self.sqliteUses(path: Self.relative(path), text: try String(contentsOfFile: path, encoding: .utf8)) {
                Issue.record(Comment(rawValue: use))
            }
        }
    }

    @Test("every target imports only the targets and products Package.swift declares for it")
    func declaredImports() throws {
        let targets = Self.declaredTargets(inManifest: try String(contentsOfFile: Self.manifest, encoding: .utf8))
        #expect(targets.contains { $0.name == Self.connectionTarget && $0.dependencies.contains("CSQLCipher") }, "Package.swift was not read: no \(Self.connectionTarget) target found")
        for target in targets where !target.isTest {
            let files = try Self.swiftFiles(under: Self.repository + "/" + target.folder).map { path in
                (path: Self.relative(path), text: try String(contentsOfFile: path, encoding: .utf8))
            }
            for message in Self.undeclaredImports(target: target, files: files) { Issue.record(Comment(rawValue: message)) }
        }
    }

    // MARK: Controls: the check finds what it should

    @Test("the module checks report a C call, an import of CSQLCipher and an undeclared import, and not comments or strings")
    func moduleControl() {
        let uses = Self.sqliteUses(path: "Low/Bad.swift", text: """
            import CSQLCipher
            /// Calls `sqlite3_rekey(handle, …)`, in a doc comment only.
            let message = "sqlite3_backup_finish(x) returned"  // sqlite3_step(statement)
            let code = sqlite3_step (statement)
            let type = sqlite3_destructor_type.self
            """)
        #expect(uses == [
            "Low/Bad.swift:1 imports CSQLCipher: only SQLCipherConnection may (put the call behind an API there)",
            "Low/Bad.swift:4 calls sqlite3_step: only SQLCipherConnection calls SQLite's C API (put the call behind an API there)",
        ])
        let targets = Self.declaredTargets(inManifest: """
            let package = Package(
                dependencies: [.package(url: "https://example.com/yams", from: "6.0.0")],  // not a target
                targets: [
                    .target(name: "Low"),
                    // .target(name: "Commented", dependencies: ["Other"]),
                    .target(name: "High", dependencies: ["Low", .product(name: "Yams", package: "yams-package"), .target(name: "Side")]),
                    .executableTarget(name: "my-tool", dependencies: ["High"], path: "Tools/Mine"),
                    .testTarget(name: "HighTests", dependencies: ["High"]),
                ]
            )
            """)
        #expect(targets == [
            DeclaredTarget(name: "Low", folder: "Sources/Low", dependencies: [], isTest: false),
            DeclaredTarget(name: "High", folder: "Sources/High", dependencies: ["Low", "Yams", "Side"], isTest: false),
            DeclaredTarget(name: "my-tool", folder: "Tools/Mine", dependencies: ["High"], isTest: false),
            DeclaredTarget(name: "HighTests", folder: "Tests/HighTests", dependencies: ["High"], isTest: true),
        ])
        let imports = Self.undeclaredImports(target: targets[1], files: [(path: "Sources/High/A.swift", text: """
            import Foundation
            @_exported import Low
            // import Hidden
            package import struct Yams.Node
            import Hidden
            let text = "import Other"
            """)])
        #expect(imports == ["Sources/High/A.swift:5 imports Hidden, which target High does not declare in Package.swift: add it to its dependencies"])
    }


    @Test("the check reports a type of a later folder, and not one of an earlier folder, a comment or a string")
    func control() {
        let files = [
            SourceFile(path: "A/Low.swift", folder: "A", text: """
                /// Mentions High in a comment only.
                struct Low { let text = "High \\(Other.name) \\"High\\"" }
                private struct Hidden {}
                """),
            SourceFile(path: "B/High.swift", folder: "B", text: "public final class High { let low = Low() }\nenum Other { static let name = \"\" }\n"),
            SourceFile(path: "A/Bad.swift", folder: "A", text: "// fine\nextension Low {\n    func make() -> High { High() }\n}\n"),
        ]
        let violations = Self.violations(order: ["A", "B"], files: files)
        #expect(violations == [
            "A/Low.swift:2 (folder A/) uses Other, declared in B/High.swift (folder B/), which comes after A/ in the Architecture article's order",
            "A/Bad.swift:3 (folder A/) uses High, declared in B/High.swift (folder B/), which comes after A/ in the Architecture article's order",
        ])
        #expect(Self.declaredTypes(in: files[0].text).map(\.name) == ["Low"], "private types are not visible to other folders")
    }

    @Test("comments and string literals are blanked, interpolations and line breaks kept")
    func codeOnly() {
        let source = "let a = \"x // y\" // z\n/* B /* nested */ C */ let b = #\"q\"# + \"\"\"\n  D \\(e(\"f\")) g\n  \"\"\"\n"
        let code = Self.codeOnly(source)
        #expect(code.split(separator: "\n", omittingEmptySubsequences: false).count == source.split(separator: "\n", omittingEmptySubsequences: false).count)
        let words = Self.words(in: code).map(\.word)
        #expect(words == ["let", "a", "let", "b", "e"])
    }

    @Test("the article's table gives one folder per row, in order")
    func parsesTheArticle() throws {
        let order = try Self.folderOrder(inArticle: """
            ### Inside the top module

            | folder | job |
            |---|---|
            | `Errors/` | errors |
            | `Keying/` | keys |

            ### Next
            | `Other/` | not in the table |
            """)
        #expect(order == ["Errors", "Keying"])
        #expect(throws: ArchitectureArticleError.self) {
            try Self.folderOrder(inArticle: "### Inside the top module\n\n| folder | job |\n|---|---|\n| `Fleet/`, `Inspection/` | two |\n")
        }
    }

    // MARK: The folder order

    struct ArchitectureArticleError: Error, CustomStringConvertible {
        let description: String
    }

    /// The folders in the order of the table under "### Inside the top module": one folder per row,
    /// written `` `Name/` `` in the first column.
    static func folderOrder(inArticle text: String) throws -> [String] {
        guard let start = text.range(of: "### Inside the top module") else {
            throw ArchitectureArticleError(description: "no \"### Inside the top module\" section")
        }
        let section = text[start.upperBound...].split(separator: "\n", omittingEmptySubsequences: false).dropFirst().prefix { !$0.hasPrefix("#") }
        var order: [String] = []
        for line in section where line.hasPrefix("|") {
            let first = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().first?.trimmingCharacters(in: .whitespaces) ?? ""
            if first == "folder" || first.allSatisfy({ $0 == "-" || $0 == ":" }) { continue }
            guard first.hasPrefix("`"), first.hasSuffix("/`"), first.filter({ $0 == "`" }).count == 2 else {
                throw ArchitectureArticleError(description: "a row of the folder table must name one folder as `Name/`: \(line)")
            }
            let folder = String(first.dropFirst().dropLast(2))
            guard !order.contains(folder) else { throw ArchitectureArticleError(description: "the folder table lists \(folder)/ twice") }
            order.append(folder)
        }
        return order
    }

    // MARK: Declarations and uses

    struct SourceFile {
        /// The path shown in messages.
        let path: String
        /// The top folder inside the module, or `nil` for a file at the module's root.
        let folder: String?
        let text: String
    }

    /// Every use of a type declared in a folder that comes later in `order`, one message each
    /// (file, line, type and both folders); the first use per file and type.
    static func violations(order: [String], files: [SourceFile]) -> [String] {
        let rank = Dictionary(order.enumerated().map { ($1, $0) }, uniquingKeysWith: min)
        var declared: [String: (folder: String, path: String)] = [:]
        for file in files {
            guard let folder = file.folder else { continue }
            for type in declaredTypes(in: file.text) { declared[type.name] = (folder, file.path) }
        }
        var messages: [String] = []
        for file in files {
            guard let folder = file.folder, let own = rank[folder] else { continue }
            var seen: Set<String> = []
            for (word, line) in words(in: codeOnly(file.text)) where !seen.contains(word) {
                guard let owner = declared[word], owner.folder != folder, let theirs = rank[owner.folder], theirs > own else { continue }
                seen.insert(word)
                messages.append("\(file.path):\(line) (folder \(folder)/) uses \(word), declared in \(owner.path) (folder \(owner.folder)/), which comes after \(folder)/ in the Architecture article's order")
            }
        }
        return messages
    }

    /// The types a file declares at top level (struct, class, enum, protocol, actor, typealias),
    /// except `private` and `fileprivate` ones, which no other file can see.
    static func declaredTypes(in text: String) -> [(name: String, line: Int)] {
        let modifiers: Set<String> = ["public", "package", "internal", "open", "final", "indirect", "nonisolated"]
        let kinds: Set<String> = ["struct", "class", "enum", "protocol", "actor", "typealias"]
        var types: [(String, Int)] = []
        for (index, line) in codeOnly(text).split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            guard let first = line.first, !first.isWhitespace else { continue }  // nested declarations are indented
            var tokens = stripAttributes(String(line)).split(whereSeparator: { $0.isWhitespace || $0 == ":" || $0 == "<" || $0 == "=" || $0 == "{" }).map(String.init)
            while let token = tokens.first, modifiers.contains(token) { tokens.removeFirst() }
            guard tokens.count >= 2, kinds.contains(tokens[0]) else { continue }
            types.append((tokens[1], index + 1))
        }
        return types
    }

    /// `line` without its leading attributes (`@MainActor`, `@available(macOS 15, *)`).
    private static func stripAttributes(_ line: String) -> String {
        var rest = Substring(line)
        while rest.first == "@" {
            rest = rest.dropFirst().drop { $0.isLetter || $0.isNumber || $0 == "_" }
            if rest.first == "(" {
                var depth = 0
                while let character = rest.first {
                    rest = rest.dropFirst()
                    if character == "(" { depth += 1 } else if character == ")" { depth -= 1; if depth == 0 { break } }
                }
            }
            rest = rest.drop { $0.isWhitespace }
        }
        return String(rest)
    }

    /// The identifiers of `code` with their line numbers.
    static func words(in code: String) -> [(word: String, line: Int)] {
        var words: [(String, Int)] = []
        var line = 1
        var current = ""
        func flush() {
            if let first = current.first, !first.isNumber { words.append((current, line)) }
            current = ""
        }
        for character in code {
            if character.isLetter || character.isNumber || character == "_" {
                current.append(character)
            } else {
                flush()
                if character == "\n" { line += 1 }
            }
        }
        flush()
        return words
    }

    /// `source` with every comment and the text of every string literal replaced by spaces (line
    /// breaks kept, so line numbers stay); the code inside string interpolations is kept.
    static func codeOnly(_ source: String) -> String {
        enum Context {
            case code(parentheses: Int)  // the file, or an interpolation inside a string
            case string(multiline: Bool, hashes: Int)
        }
        let input = Array(source.utf8)
        var output = input
        var stack: [Context] = [.code(parentheses: 0)]
        let space = UInt8(ascii: " "), newline = UInt8(ascii: "\n"), quote = UInt8(ascii: "\""), hash = UInt8(ascii: "#")
        let slash = UInt8(ascii: "/"), star = UInt8(ascii: "*"), backslash = UInt8(ascii: "\\")
        func blank(_ range: Range<Int>) {
            for index in range where input[index] != newline { output[index] = space }
        }
        func at(_ index: Int) -> UInt8? { index < input.count ? input[index] : nil }
        func hashes(from index: Int) -> Int {
            var count = 0
            while at(index + count) == hash { count += 1 }
            return count
        }
        func isTripleQuote(_ index: Int) -> Bool { at(index) == quote && at(index + 1) == quote && at(index + 2) == quote }
        var index = 0
        while index < input.count {
            let byte = input[index]
            switch stack[stack.count - 1] {
            case .code(let parentheses):
                if byte == slash && at(index + 1) == slash {
                    var end = index
                    while end < input.count && input[end] != newline { end += 1 }
                    blank(index..<end)
                    index = end
                } else if byte == slash && at(index + 1) == star {
                    var depth = 0
                    var end = index
                    repeat {
                        if at(end) == slash && at(end + 1) == star { depth += 1; end += 2 }
                        else if at(end) == star && at(end + 1) == slash { depth -= 1; end += 2 }
                        else { end += 1 }
                    } while depth > 0 && end < input.count
                    blank(index..<min(end, input.count))
                    index = end
                } else if byte == quote || (byte == hash && at(index + hashes(from: index)) == quote) {
                    let count = hashes(from: index)
                    let multiline = isTripleQuote(index + count)
                    let end = index + count + (multiline ? 3 : 1)
                    blank(index..<end)
                    stack.append(.string(multiline: multiline, hashes: count))
                    index = end
                } else if byte == UInt8(ascii: "(") {
                    stack[stack.count - 1] = .code(parentheses: parentheses + 1)
                    index += 1
                } else if byte == UInt8(ascii: ")") {
                    if parentheses == 0 && stack.count > 1 {
                        stack.removeLast()  // the end of an interpolation: back in its string
                        blank(index..<index + 1)
                    } else {
                        stack[stack.count - 1] = .code(parentheses: max(0, parentheses - 1))
                    }
                    index += 1
                } else {
                    index += 1
                }
            case .string(let multiline, let count):
                if byte == backslash && hashes(from: index + 1) == count {
                    let next = index + 1 + count
                    if at(next) == UInt8(ascii: "(") {
                        blank(index..<next + 1)
                        stack.append(.code(parentheses: 0))
                        index = next + 1
                    } else {
                        blank(index..<min(next + 1, input.count))
                        index = next + 1
                    }
                } else if multiline ? isTripleQuote(index) && hashes(from: index + 3) >= count : byte == quote && hashes(from: index + 1) >= count {
                    let end = index + (multiline ? 3 : 1) + count
                    blank(index..<end)
                    stack.removeLast()
                    index = end
                } else {
                    blank(index..<index + 1)
                    index += 1
                }
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    // MARK: Files

    static func swiftFiles(under folder: String) throws -> [String] {
        guard let enumerator = FileManager.default.enumerator(atPath: folder) else { return [] }
        return enumerator.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }.sorted().map { folder + "/" + $0 }
    }

    /// The top folder of a file inside the module, or `nil` for a file at the module's root.
    static func folder(of path: String) -> String? {
        let parts = path.dropFirst(module.count + 1).split(separator: "/")
        return parts.count > 1 ? String(parts[0]) : nil
    }

    static func relative(_ path: String) -> String {
        path.hasPrefix(repository + "/") ? String(path.dropFirst(repository.count + 1)) : path
    }

    /// Lines as `wc -l` counts them, plus a last line without a line break.
    static func lineCount(_ text: String) -> Int {
        let breaks = text.utf8.filter { $0 == UInt8(ascii: "\n") }.count
        return breaks + (text.isEmpty || text.hasSuffix("\n") ? 0 : 1)
    }
}
