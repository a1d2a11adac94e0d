import CipherFormats
import Foundation
import KeyConfiguration
import Testing
import TestSupport

@Suite("Keys file")
struct KeysFileTests {
    let directory = TemporaryDirectory("keysfile")

    func write(_ yaml: String) -> String {
        let path = directory.file("Keys")
        _ = FileManager.default.createFile(atPath: path, contents: Data(yaml.utf8), attributes: [.posixPermissions: 0o600])
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
        // The same database through a different spelling of its path (never by changing the
        // working directory: parallel tests share it).
        #expect(file.entry(forDatabase: directory.path + "/./sub/../app.sqlite") != nil)
    }

    @Test("values in every YAML style keep their own text: the file is parsed once, masked, and each scalar read back")
    func everyScalarStyle() throws {
        let hex = TestKeys.hex()
        let path = write("""
            databases:
              - path: "t\\u00e9nants/caf\\xE9 \\"q\\".sqlite"   # escapes in double quotes
                keys:
                  - id: 'it''s ü 🔑'
                    passphrase: "pass: \\"word\\""
                  - id: >-
                      folded
                      id
                    env: APP_KEY_1
                    format: &format passphrase
                  - id: plain
                      continued  # a comment
                    hex: \(hex)
                  - id: |
                      literal
                    env: APP_KEY_3
                    format: *format
                  - {id: "flow \\t tab
                      two", env: APP_KEY_2, format: hex}
            """)
        let file = try KeysFile.load(path: path)
        #expect(file.entries.map(\.configuredPath) == ["ténants/café \"q\".sqlite"])
        let keys = file.entries[0].keys
        #expect(keys.map(\.id) == ["it's ü 🔑", "folded id", "plain continued", "literal\n", "flow \t tab two"])
        let sources = keys.map { key -> String in
            switch key.source {
            case .environment(let variable, let format): return "\(variable) \(format)"
            case .passphrase: return "passphrase"
            case .hex: return "hex"
            default: return "other"
            }
        }
        #expect(sources == ["passphrase", "APP_KEY_1 passphrase", "hex", "APP_KEY_3 passphrase", "APP_KEY_2 hex"])
        let list = try file.keyList(forDatabase: file.entries[0].path, environment: ["APP_KEY_1": "one", "APP_KEY_3": "three", "APP_KEY_2": TestKeys.hex()])
        #expect(list.ids == keys.map(\.id))
    }

    @Test("a passphrase that an alias also puts where text is read never becomes that text, before or after its own field")
    func aliasedSecret() throws {
        let secret = "aliasedPassphrase2024"
        let files = [
            // The alias after the anchored passphrase, in a later key.
            "databases:\n  - path: a.sqlite\n    keys:\n      - id: k1\n        passphrase: &p \(secret)\n      - id: *p\n        env: APP_KEY\n",
            // The anchored value read as an id first, then as a passphrase through the alias.
            "databases:\n  - path: a.sqlite\n    keys:\n      - id: &p \(secret)\n        env: APP_KEY\n      - id: k2\n        passphrase: *p\n",
        ]
        for yaml in files {
            let file = try KeysFile.load(path: write(yaml))
            let keys = file.entries[0].keys
            #expect(keys.count == 2)
            #expect(keys.allSatisfy { !$0.id.contains(secret) }, "\(keys.map(\.id))")
            #expect(keys.contains { if case .passphrase = $0.source { true } else { false } })
        }
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
            ("databases:\n  - path: a.sqlite\n    paths: 1\n    keys: []\n", { if case .unknownField(_, _, "paths", _) = $0 { true } else { false } }),
            // Not a near miss of a field name: possibly a key, so not shown.
            ("databases:\n  - path: a.sqlite\n    extra: 1\n    keys: []\n", { if case .unknownField(_, _, KeyConfigurationError.hiddenFieldName, _) = $0 { true } else { false } }),
            ("databases:\n  - path: \"\"\n    keys: []\n", { if case .keysFileInvalid = $0 { true } else { false } }),
            // The same field twice, once spelled with an escape (equal only once unmasked).
            ("databases:\n  - path: a.sqlite\n    keys:\n      - id: k\n        \"pass\\x70hrase\": \"\(secret)\"\n        passphrase: \"\(secret)\"\n",
             { if case .keysFileInvalid(_, "line 4, column 9", "a field appears twice (passphrase); keep one") = $0 { true } else { false } }),
            // An anchor name that libyaml refuses in the file is refused in the masked copy too.
            ("databases:\n  - &tenänt\n    path: a.sqlite\n    keys: []\n", { if case .keysFileInvalid(_, _, let p) = $0 { p.contains("not valid YAML") } else { false } }),
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
        #expect(throws: KeyConfigurationError.databaseNotConfigured(database: "/elsewhere/b.sqlite", resolvedPath: "/elsewhere/b.sqlite", keysFile: path, configured: ["a.sqlite"], resolvedConfigured: [directory.file("a.sqlite")])) {
            try file.keyList(forDatabase: "/elsewhere/b.sqlite")
        }
    }

    @Test("a relative database path is taken from the working directory, the entries from the Keys file's folder; the error shows both resolved")
    func relativePaths() throws {
        try FileManager.default.createDirectory(atPath: directory.file("data"), withIntermediateDirectories: true)
        let path = write("databases:\n  - path: data/notes.sqlite\n    keys:\n      - id: k\n        passphrase: p\n  - path: \"tenants/*.sqlite\"\n    keys:\n      - id: t\n        passphrase: q\n")
        let file = try KeysFile.load(path: path)
        // The test process's working directory is not the Keys file's folder (it is read, never changed).
        let cwd = FileManager.default.currentDirectoryPath
        #expect(cwd != directory.path)
        let argument = cwd + "/data/notes.sqlite", entry = directory.file("data/notes.sqlite")
        do {
            _ = try file.keyList(forDatabase: "data/notes.sqlite", environment: [:])
            Issue.record("data/notes.sqlite from \(cwd) resolved to the entry for \(entry)")
        } catch {
            #expect(error == .databaseNotConfigured(
                database: "data/notes.sqlite", resolvedPath: argument, keysFile: path,
                configured: ["data/notes.sqlite", "tenants/*.sqlite"], resolvedConfigured: [entry, directory.file("tenants/*.sqlite")]))
            #expect(error.description == "data/notes.sqlite (from the working directory: \(argument)) is not listed in Keys file \(path) (its entries, taken from its folder: \(entry), \(directory.file("tenants/*.sqlite"))); a relative database path is taken from the working directory, so give it from there or as an absolute path, or add an entry with its keys")
        }
        // The same file named from the working directory is found.
        let fromWorkingDirectory = String(repeating: "../", count: cwd.split(separator: "/").count) + String(entry.dropFirst())
        #expect(try file.keyList(forDatabase: fromWorkingDirectory, environment: [:]).ids == ["k"])
        #expect(try file.keyList(forDatabase: entry, environment: [:]).ids == ["k"])
    }

    @Test("plaintext, legacy and cipher settings entries load; misuse is an error naming the place")
    func cipherFields() throws {
        let hex = TestKeys.hex()
        let path = write("""
            databases:
              - path: app.sqlite
                keys:
                  - id: v1
                    plaintext: true
                  - id: "2019"
                    passphrase: "old"
                    legacy: true
                  - id: "2021"
                    passphrase: "mid"
                    cipher: {kdf_iter: 4000, page_size: 1024, use_hmac: false}
                  - id: "2025"
                    hex: \(hex)
                    cipher:
                      page_size: 4096
            """)
        let file = try KeysFile.load(path: path)
        let keys = file.entries[0].keys
        #expect(keys.map(\.id) == ["v1", "2019", "2021", "2025"])
        if case .plaintext = keys[0].source {} else { Issue.record("expected a plaintext entry") }
        #expect(keys[1].legacy)
        #expect(keys[2].cipher == CipherSettings(kdfIterations: 4000, pageSize: 1024, useHMAC: false))
        #expect(keys[3].cipher == CipherSettings(pageSize: 4096))
        let list = try file.keyList(forDatabase: directory.file("app.sqlite"), environment: [:])
        #expect(list.plaintextKeyID == "v1")
        #expect(list.currentID == "2025")

        let unknown = write("databases:\n  - path: a.sqlite\n    keys:\n      - id: k\n        passphrase: p\n        cipher: {kdf_iters: 4000}\n")
        #expect(throws: KeyConfigurationError.unknownField(path: unknown, location: "databases[0].keys[0].cipher", field: "kdf_iters", allowed: ["compatibility", "kdf_iter", "page_size", "use_hmac", "kdf_algorithm", "hmac_algorithm", "plaintext_header_size", "hmac_pgno", "hmac_salt_mask", "fast_kdf_iter"])) {
            try KeysFile.load(path: unknown)
        }
        let misplaced = write("databases:\n  - path: a.sqlite\n    keys:\n      - id: k\n        passphrase: p\n      - id: v1\n        plaintext: true\n")
        #expect(throws: KeyConfigurationError.plaintextEntryMisplaced(keyID: "v1", database: directory.file("a.sqlite"))) {
            try KeysFile.load(path: misplaced).keyList(forDatabase: directory.file("a.sqlite"), environment: [:])
        }
        let both = write("databases:\n  - path: a.sqlite\n    keys:\n      - id: v1\n        plaintext: true\n        passphrase: secret-text\n      - id: k\n        passphrase: p\n")
        do {
            _ = try KeysFile.load(path: both)
            Issue.record("a plaintext entry with a passphrase loaded")
        } catch {
            #expect(!error.description.contains("secret-text"))
            #expect(error == .keySourceCount(keyID: "v1", database: "a.sqlite", sources: ["passphrase", "plaintext"], keysFile: both))
        }
    }

    @Test("a glob entry names every matching database; an exact entry wins over it")
    func globEntries() throws {
        let hex = TestKeys.hex(), other = TestKeys.hex()
        try FileManager.default.createDirectory(atPath: directory.file("tenants"), withIntermediateDirectories: true)
        for name in ["a.sqlite", "b.sqlite", "special.sqlite", "notes.txt", ".a.sqlite.0badc0de.rekey-export", "a.sqlite-journal"] {
            _ = FileManager.default.createFile(atPath: directory.file("tenants/\(name)"), contents: Data("x".utf8))
        }
        let path = write("""
            databases:
              - path: tenants/special.sqlite
                keys:
                  - id: special
                    hex: \(other)
              - path: "tenants/*.sqlite"
                keys:
                  - id: tenant
                    hex: \(hex)
            """)
        let file = try KeysFile.load(path: path)
        #expect(file.entries[1].isPattern)
        #expect(file.allDatabasePaths() == ["special", "a", "b"].map { directory.file("tenants/\($0).sqlite") })
        #expect(try file.keyList(forDatabase: directory.file("tenants/b.sqlite"), environment: [:]).ids == ["tenant"])
        #expect(try file.keyList(forDatabase: directory.file("tenants/special.sqlite"), environment: [:]).ids == ["special"])
        #expect(file.entry(forDatabase: directory.file("tenants/sub/c.sqlite")) == nil)
    }

    @Test("a glob that matches every name in a folder leaves out SQLite's side files and the step-aside lock file")
    func globLeavesOutSideFiles() throws {
        try FileManager.default.createDirectory(atPath: directory.file("all"), withIntermediateDirectories: true)
        for name in ["a.sqlite", "a.sqlite-lock", "a.sqlite-journal", "a.sqlite-wal", "a.sqlite-shm", "b.db", "b.db-lock"] {
            _ = FileManager.default.createFile(atPath: directory.file("all/\(name)"), contents: Data("x".utf8))
        }
        let path = write("""
            databases:
              - path: "all/*"
                keys:
                  - id: tenant
                    hex: \(TestKeys.hex())
            """)
        #expect(try KeysFile.load(path: path).allDatabasePaths() == ["a.sqlite", "b.db"].map { directory.file("all/\($0)") })
    }

    @Test("Keys.example at the top level of the repository is valid and documents every option")
    func example() throws {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let path = repository.appendingPathComponent("Keys.example").path
        // Loaded from a private copy: it holds (demo) passphrases, and git checks files out 0644.
        let directory = TemporaryDirectory("example")
        _ = FileManager.default.createFile(atPath: directory.file("Keys"), contents: TestFiles.contents(path), attributes: [.posixPermissions: 0o600])
        let file = try KeysFile.load(path: directory.file("Keys"))
        #expect(!file.entries.isEmpty)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        for option in ["path:", "id:", "passphrase:", "hex:", "env:", "file:", "format:", "plaintext:", "legacy:", "cipher:", "sqlcipher4", "compatibility:", "kdf_iter:", "page_size:", "use_hmac:", "kdf_algorithm:", "hmac_algorithm:",
                       "plaintext_header_size:", "hmac_pgno:", "hmac_salt_mask:", "fast_kdf_iter:", "created:", "*"] {
            #expect(text.contains(option), "Keys.example does not document \(option)")
        }
    }

    @Test("an entry's path is the one URL standardizing gives, on the quick path for plain names and the URL one otherwise")
    func entryPathsAsURLGivesThem() {
        let folders = ["/", "/srv", "/srv/app", "/srv/app/", "/srv/./app", "/srv/../app", "/srv//app", "/srv/a b", "/srv/...", "/srv/.hidden", "/srv/x+y_z-1.2"]
        let paths = ["app.sqlite", "fleet/db-00001.sqlite", "./app.sqlite", "../app.sqlite", "a/../b.sqlite", "a//b.sqlite", "a/./b",
                     "dir/", ".", "..", "...", ".hidden.sqlite", "a b.sqlite", "é.sqlite", "a%20b", "a;b", "a#b", "~/x", "/abs/app.sqlite", "/abs/../x"]
        for folder in folders {
            let keysFile = folder.hasSuffix("/") ? folder + "Keys" : folder + "/Keys"
            let base = URL(fileURLWithPath: keysFile).deletingLastPathComponent().path
            for path in paths {
                let viaURL = (path.hasPrefix("/") ? URL(fileURLWithPath: path) : URL(fileURLWithPath: base).appendingPathComponent(path)).standardizedFileURL.path
                #expect(KeysFile.databasePath(ofEntry: path, inKeysFileAt: keysFile) == viaURL,
                        "\(folder) + \(path)")
            }
        }
    }
}
