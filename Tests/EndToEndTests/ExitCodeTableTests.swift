import Foundation
@testable import rekey
import Testing
import TestSupport

/// The rekey guide's exit-code table is rendered from `ExitStatus`, so its wording lives only in
/// `ExitStatus.meaning` (checked as `ErrorTableTests` checks docs/errors.md).
@Suite("ExitCodeTable: the rekey guide's exit codes", .ownThread)
struct ExitCodeTableTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let guide = repository.appendingPathComponent("Sources/EncryptedSQLite/EncryptedSQLite.docc/RekeyCommand.md").path
    static let begin = "<!-- BEGIN generated from ExitStatus.meaning (Sources/rekey/ExitStatus.swift): do not edit by hand; regenerate with UPDATE_EXIT_CODE_TABLE=1 swift test --filter ExitCodeTable -->\n"
    static let end = "<!-- END generated exit-code table -->\n"

    /// `text` with what lies between the markers replaced by `table`, or `nil` when the markers
    /// are missing, out of order or there more than once.
    static func replacingTable(in text: String, with table: String) -> String? {
        let beginParts = text.components(separatedBy: begin)
        let endParts = text.components(separatedBy: end)
        guard beginParts.count == 2, endParts.count == 2,
              let beginRange = text.range(of: begin), let endRange = text.range(of: end),
              beginRange.upperBound <= endRange.lowerBound else { return nil }
        return String(text[..<beginRange.upperBound]) + table + String(text[endRange.lowerBound...])
    }

    @Test("the guide's exit-code table is the one rendered from ExitStatus, between its markers")
    func upToDate() throws {
        let committed = try String(contentsOfFile: Self.guide, encoding: .utf8)
        let rendered = try #require(Self.replacingTable(in: committed, with: ExitStatus.markdownTable),
                                    "RekeyCommand.md needs exactly one pair of markers, in order:\n\(Self.begin)\(Self.end)")
        if ProcessInfo.processInfo.environment["UPDATE_EXIT_CODE_TABLE"] == "1" {
            try rendered.write(toFile: Self.guide, atomically: true, encoding: .utf8)
        }
        let now = try String(contentsOfFile: Self.guide, encoding: .utf8)
        #expect(now == rendered, "RekeyCommand.md's exit-code table differs from ExitStatus; regenerate it with: UPDATE_EXIT_CODE_TABLE=1 swift test --filter ExitCodeTable")
    }

    @Test("the table has one row per exit code, in order")
    func everyCode() {
        let rows = ExitStatus.markdownTable.split(separator: "\n").dropFirst(2)
        #expect(rows.map { $0.split(separator: "|").first?.trimmingCharacters(in: .whitespaces) } == ExitStatus.allCases.map { "\($0.code)" })
    }
}
