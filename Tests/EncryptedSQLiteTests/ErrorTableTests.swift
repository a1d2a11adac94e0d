import Foundation
import Testing
import TestSupport

@Suite("ErrorTable: docs/errors.md")
struct ErrorTableTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let table = repository.appendingPathComponent("docs/errors.md").path

    @Test("docs/errors.md is the table rendered from the bad-input catalog the matrix tests run")
    func upToDate() throws {
        let rendered = BadInputCatalog.markdown
        if ProcessInfo.processInfo.environment["UPDATE_ERROR_TABLE"] == "1" {
            try FileManager.default.createDirectory(atPath: (Self.table as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try rendered.write(toFile: Self.table, atomically: true, encoding: .utf8)
        }
        let committed = (try? String(contentsOfFile: Self.table, encoding: .utf8)) ?? ""
        #expect(committed == rendered, "docs/errors.md differs from the bad-input catalog; regenerate it with: UPDATE_ERROR_TABLE=1 swift test --filter ErrorTable")
    }

    @Test("the README's Errors section links the table and states the number of bad inputs it covers")
    func readme() throws {
        let readme = try String(contentsOf: Self.repository.appendingPathComponent("README.md"), encoding: .utf8)
        let section = readme.components(separatedBy: "## Errors").dropFirst().first?.components(separatedBy: "\n## ").first ?? ""
        #expect(section.contains("docs/errors.md"))
        #expect(section.contains("\(BadInputCatalog.cases.count) bad inputs"), "the README's Errors section should say \(BadInputCatalog.cases.count) bad inputs")
    }
}
