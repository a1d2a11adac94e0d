import Foundation
import Testing

/// The mutation pass (`scripts/mutate.sh`, Tests/README.md) is run by hand, not in CI, so its
/// mutants could stop applying unnoticed when the code they break changes. This checks in every
/// run that each patch in `Tests/Mutants/` says what it breaks and which tests catch it, and that
/// each of its hunks still finds the exact lines it replaces, once, in today's source.
@Suite("Mutation pass: every mutant still applies to today's source")
struct MutantListTests {
    static let folder = ArchitectureTests.repository + "/Tests/Mutants"

    /// One hunk of a mutant: the file it edits and the lines it expects there (context and removed).
    struct Hunk {
        let file: String
        let expected: String
    }

    /// The header fields and hunks of a unified diff made by `git diff`.
    static func parse(_ patch: String) -> (fields: [String: String], hunks: [Hunk]) {
        var fields: [String: String] = [:]
        var hunks: [Hunk] = []
        var file: String?
        var lines: [String]?
        func endHunk() {
            if let file, let lines { hunks.append(Hunk(file: file, expected: lines.joined(separator: "\n"))) }
            lines = nil
        }
        for line in patch.components(separatedBy: "\n") {
            if file == nil, lines == nil, let colon = line.firstIndex(of: ":"), !line.hasPrefix("diff ") {
                fields[String(line[..<colon])] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            if line.hasPrefix("diff --git ") {
                endHunk()
                file = nil
            } else if line.hasPrefix("--- ") {
                endHunk()
            } else if line.hasPrefix("+++ b/") {
                file = String(line.dropFirst(6))
            } else if line.hasPrefix("@@") {
                endHunk()
                lines = []
            } else if lines != nil, line.hasPrefix(" ") || line.hasPrefix("-") {
                lines?.append(String(line.dropFirst()))
            } else if lines != nil, line.isEmpty {
                continue  // the patch's last line
            }
        }
        endHunk()
        return (fields, hunks)
    }

    static func occurrences(of needle: String, in text: String) -> Int {
        guard !needle.isEmpty else { return 0 }
        return text.components(separatedBy: needle).count - 1
    }

    @Test("each mutant names what it breaks and the tests that catch it, and each of its hunks matches today's source exactly once")
    func mutantsApply() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.folder).filter { $0.hasSuffix(".patch") }.sorted()
        #expect(names.count >= 19, "the mutation pass holds at least the 19 mutants of issue 35: \(names)")
        for name in names {
            let (fields, hunks) = Self.parse(try String(contentsOfFile: Self.folder + "/" + name, encoding: .utf8))
            #expect(!(fields["Mutant"] ?? "").isEmpty, "\(name): no `Mutant:` line saying what it breaks")
            #expect(!(fields["Tests"] ?? "").isEmpty, "\(name): no `Tests:` line naming the tests that must catch it")
            #expect(!hunks.isEmpty, "\(name): no hunk")
            for hunk in hunks {
                let source = try String(contentsOfFile: ArchitectureTests.repository + "/" + hunk.file, encoding: .utf8)
                let found = Self.occurrences(of: hunk.expected, in: source)
                #expect(found == 1, "\(name): the lines it replaces in \(hunk.file) occur \(found) times; update the mutant (scripts/mutate.sh \(name))")
            }
        }
    }

    @Test("control: a hunk whose lines changed in the source is reported")
    func changedSourceIsReported() {
        let patch = """
            Mutant: example
            Tests: Example

            diff --git a/F.swift b/F.swift
            --- a/F.swift
            +++ b/F.swift
            @@ -1,2 +1,2 @@
             let a = 1
            -let b = 2
            +let b = 3

            """
        let (fields, hunks) = Self.parse(patch)
        #expect(fields["Mutant"] == "example" && fields["Tests"] == "Example")
        #expect(hunks.count == 1 && hunks.first?.file == "F.swift")
        #expect(Self.occurrences(of: hunks[0].expected, in: "let a = 1\nlet b = 2\n") == 1)
        #expect(Self.occurrences(of: hunks[0].expected, in: "let a = 1\nlet b = 4\n") == 0)
    }
}
