import EncryptedSQLite
import Foundation
import Testing
import TestSupport

@Suite("Keys file")
struct KeysFileTests {
    let directory = TemporaryDirectory("keysfile")

    func write(_ yaml: String) -> String {
        let path = directory.file("Keys")
        _ = FileManager.default.createFile(atPath: path, contents: Data(yaml.utf8))
        return path
    }

    @Test("the documented shape loads; paths are taken from the Keys file's folder")
    func documentedShape() throws {
        let hex = TestKeys.hex()
        let keyFile = TestKeys.writeKeyFile("from file", in: directory, name: "k.key")
        let path = write("""
            databases:
              - path: app.sqlite            # relative to the Keys file's folder
                keys:
                  - id: "2024-01"
                    passphrase: "it's: a \\"passphrase\\""
                  - id: "2024-07"
                    hex: \(hex)
                  - id: "2025-01"
                    file: k.key
                  - id: "2025-06"
                    env: APP_DB_KEY_2025_06
              - path: /absolute/other.sqlite
                keys:
                  - id: only
                    env: OTHER
                    format: hex
            """)
        let file = try KeysFile.load(path: path)
        #expect(file.entries.map(\.path) == [directory.file("app.sqlite"), "/absolute/other.sqlite"])
        let keys = try file.keyList(forDatabase: directory.file("app.sqlite"), environment: ["APP_DB_KEY_2025_06": "env key"])
        #expect(keys.ids == ["2024-01", "2024-07", "2025-01", "2025-06"])
        if case .file(let resolved, .passphrase) = file.entries[0].keys[2].source {
            #expect(resolved == keyFile)
        } else {
            Issue.record("expected a file source")
        }
        // The same database through a different spelling of its path.
        let cwd = FileManager.default.currentDirectoryPath
        _ = FileManager.default.changeCurrentDirectoryPath(directory.path)
        defer { _ = FileManager.default.changeCurrentDirectoryPath(cwd) }
        #expect(file.entry(forDatabase: "./sub/../app.sqlite") != nil)
    }

    @Test("a hex key made only of digits still loads as text")
    func numericHex() throws {
        let digits = String(repeating: "1234567890", count: 7).prefix(64)
        let path = write("databases:\n  - path: a.sqlite\n    keys:\n      - id: k\n        hex: \(digits)\n")
        let keys = try KeysFile.load(path: path).keyList(forDatabase: directory.file("a.sqlite"), environment: [:])
        #expect(keys.ids == ["k"])
    }

    @Test("bad Keys files are typed errors with a location, never quoting the file's text")
    func badFiles() throws {
        let secret = TestKeys.passphrase().replacingOccurrences(of: "'", with: "")
        let cases: [(String, (KeyConfigurationError) -> Bool)] = [
            ("databases: [\n  - path: a\n    keys: [ {id: k, passphrase: \"\(secret)\" ", { if case .keysFileInvalid = $0 { true } else { false } }),
            ("- just\n- a list\n", { if case .keysFileInvalid(_, "the top level", _) = $0 { true } else { false } }),
            ("databases:\n  - path: a.sqlite\n", { if case .keysFileInvalid(_, _, let problem) = $0 { problem.contains("\"keys\"") } else { false } }),
            ("databases:\n  - path: a.sqlite\n    keys:\n      - id: k\n        passprase: \"\(secret)\"\n",
             { if case .unknownField(_, _, "passprase", _) = $0 { true } else { false } }),
            ("databases:\n  - path: a.sqlite\n    keys:\n      - id: k\n        passphrase: \"\(secret)\"\n        env: X\n",
             { if case .keySourceCount(keyID: "k", database: "a.sqlite", sources: ["passphrase", "env"], _) = $0 { true } else { false } }),
            ("databases:\n  - path: a.sqlite\n    keys:\n      - id: k\n", { if case .keySourceCount(keyID: "k", _, sources: [], _) = $0 { true } else { false } }),
            ("databases:\n  - path: a.sqlite\n    keys:\n      - id: k\n        env: X\n        format: pem\n", { if case .keysFileInvalid(_, _, let p) = $0 { p.contains("format") } else { false } }),
            ("databases:\n  - path: a.sqlite\n    keys:\n      - id: k\n        passphrase: \"\(secret)\"\n        format: hex\n", { if case .keysFileInvalid = $0 { true } else { false } }),
            ("databases:\n  - path: a.sqlite\n    extra: 1\n    keys: []\n", { if case .unknownField(_, _, "extra", _) = $0 { true } else { false } }),
            ("databases:\n  - path: \"\"\n    keys: []\n", { if case .keysFileInvalid = $0 { true } else { false } }),
        ]
        for (yaml, matches) in cases {
            let path = write(yaml)
            do {
                _ = try KeysFile.load(path: path)
                Issue.record("expected an error for:\n\(yaml)")
            } catch {
                #expect(matches(error), "\(error) for:\n\(yaml)")
                #expect(!error.description.contains(secret), "\(error)")
                #expect(error.description.contains(path))
            }
        }
    }

    @Test("a missing Keys file and an unlisted database are distinct errors")
    func missingAndUnlisted() throws {
        #expect(throws: KeyConfigurationError.keysFileMissing(path: directory.file("nope"))) { try KeysFile.load(path: directory.file("nope")) }
        let path = write("databases:\n  - path: a.sqlite\n    keys:\n      - id: k\n        passphrase: p\n")
        let file = try KeysFile.load(path: path)
        #expect(throws: KeyConfigurationError.databaseNotConfigured(database: "/elsewhere/b.sqlite", keysFile: path, configured: ["a.sqlite"])) {
            try file.keyList(forDatabase: "/elsewhere/b.sqlite")
        }
    }

    @Test("Keys.example at the top level of the repository is valid and documents every option")
    func example() throws {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let path = repository.appendingPathComponent("Keys.example").path
        let file = try KeysFile.load(path: path)
        #expect(!file.entries.isEmpty)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        for option in ["path:", "id:", "passphrase:", "hex:", "env:", "file:", "format:"] {
            #expect(text.contains(option), "Keys.example does not document \(option)")
        }
    }
}
