import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// The version the package states, what `rekey --version` prints, and the CHANGELOG agree.
@Suite("Version: the constant, rekey --version and CHANGELOG.md", .ownThread)
struct VersionTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `MAJOR.MINOR.PATCH` with an optional pre-release (`-dev`), as semantic versioning writes it.
    static func isSemanticVersion(_ text: String) -> Bool {
        let parts = text.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        let numbers = parts[0].split(separator: ".", omittingEmptySubsequences: false)
        return numbers.count == 3 && numbers.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }
            && (parts.count == 1 || !parts[1].isEmpty)
    }

    @Test("rekey --version prints EncryptedSQLitePackage.version, a semantic version, and exits 0")
    func rekeyVersion() throws {
        #expect(Self.isSemanticVersion(EncryptedSQLitePackage.version), "\(EncryptedSQLitePackage.version)")
        let result = try RekeyCLI.run(["--version"], in: TemporaryDirectory("version"))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == EncryptedSQLitePackage.version + "\n")
    }

    @Test("CHANGELOG.md starts with an Unreleased section; its newest release heading is the constant, or with no release yet the constant is a pre-release")
    func changelog() throws {
        let text = try String(contentsOf: Self.repository.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        let headings = text.split(separator: "\n").filter { $0.hasPrefix("## ") }.map { String($0.dropFirst(3)) }
        #expect(headings.first == "[Unreleased]", "the first section should be ## [Unreleased]: \(headings)")
        // Release headings: `[1.2.0] - 2026-01-31`.
        let releases = headings.dropFirst().map { heading -> String in
            let version = heading.split(separator: "]").first.map { String($0.dropFirst()) } ?? heading
            #expect(heading.hasPrefix("[") && Self.isSemanticVersion(version), "not a release heading: \(heading)")
            return version
        }
        if let newest = releases.first {
            #expect(newest == EncryptedSQLitePackage.version, "the newest release in CHANGELOG.md is \(newest), EncryptedSQLitePackage.version is \(EncryptedSQLitePackage.version)")
        } else {
            #expect(EncryptedSQLitePackage.version.contains("-"), "nothing is released in CHANGELOG.md, so EncryptedSQLitePackage.version should be a pre-release such as 0.1.0-dev")
        }
    }
}
