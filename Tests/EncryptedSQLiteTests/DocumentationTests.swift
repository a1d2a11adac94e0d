import Foundation
import Testing

/// Checks the promises of the docs that the compiler does not: every public type of the library's
/// modules carries a usage example in its doc comment, and every public type of the top module has
/// a place in the DocC catalog's topics.
@Suite("Documentation: an example on every public type, every public type in a DocC topic")
struct DocumentationTests {
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path + "/Sources"
    static let modules = ["SQLCipherConnection", "CipherFormats", "DatabaseMigrations", "KeyConfiguration", "EncryptedSQLite"]
    static let catalog = sources + "/EncryptedSQLite/EncryptedSQLite.docc/EncryptedSQLite.md"

    /// A public type declared at the top level of a file, with its doc comment.
    struct PublicType: Equatable {
        let name: String
        let location: String
        let hasExample: Bool
    }

    /// The public top-level types declared in `text`: `public struct|class|enum|protocol|actor`
    /// at the start of a line, with the `///` lines (and attributes) right above it.
    static func publicTypes(in text: String, file: String) -> [PublicType] {
        let lines = text.components(separatedBy: "\n")
        let declaration = /^public (?:final )?(?:struct|class|enum|protocol|actor) (\w+)/
        var found: [PublicType] = []
        for (index, line) in lines.enumerated() {
            guard let match = line.firstMatch(of: declaration) else { continue }
            var above = index - 1
            var example = false
            while above >= 0, lines[above].hasPrefix("///") || lines[above].hasPrefix("@") {
                if lines[above].contains("```") { example = true }
                above -= 1
            }
            found.append(PublicType(name: String(match.1), location: "\(file):\(index + 1)", hasExample: example))
        }
        return found
    }

    static func types(of module: String) throws -> [PublicType] {
        let folder = sources + "/" + module
        guard let walker = FileManager.default.enumerator(atPath: folder) else { return [] }
        var types: [PublicType] = []
        for case let relative as String in walker where relative.hasSuffix(".swift") {
            let text = try String(contentsOfFile: folder + "/" + relative, encoding: .utf8)
            types += publicTypes(in: text, file: "Sources/\(module)/\(relative)")
        }
        return types
    }

    @Test("every public type of the library's modules has a doc comment with an example")
    func examples() throws {
        var total = 0
        for module in Self.modules {
            let types = try Self.types(of: module)
            total += types.count
            for type in types where !type.hasExample {
                Issue.record("\(type.location): public type \(type.name) has no ```swift example in its doc comment")
            }
        }
        #expect(total > 50, "only \(total) public types found under \(Self.sources): is the path right?")
    }

    @Test("every public type of EncryptedSQLite appears in a topic of the DocC catalog")
    func topics() throws {
        let catalog = try String(contentsOfFile: Self.catalog, encoding: .utf8)
        let types = try Self.types(of: "EncryptedSQLite")
        #expect(types.count > 20)
        for type in types where !catalog.contains("``\(type.name)``") {
            Issue.record("\(type.location): \(type.name) is in no topic of EncryptedSQLite.md: give it a line under the topic it belongs to")
        }
    }

    @Test("control: a type without an example and one with an example are told apart")
    func control() {
        let text = """
            /// Has one.
            ///
            /// ```swift
            /// let x = Good()
            /// ```
            public struct Good {}

            /// Has none.
            @available(*, deprecated)
            public final class Bad {}
            struct Internal {}
            """
        #expect(Self.publicTypes(in: text, file: "F.swift") == [
            PublicType(name: "Good", location: "F.swift:6", hasExample: true),
            PublicType(name: "Bad", location: "F.swift:10", hasExample: false),
        ])
    }
}
