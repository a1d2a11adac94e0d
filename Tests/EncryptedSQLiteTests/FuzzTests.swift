@testable import CipherFormats
@testable import DatabaseMigrations
@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import PropertyBased
import Testing
import TestSupport

/// Settings of the fuzz runs: `FUZZ_ITERATIONS` (executions per fuzz target; a few thousand by
/// default, which takes seconds) and `FUZZ_SEED` (the base seed; fixed by default so that every
/// run is reproducible). The input about to run is written to `.build/fuzz/<target>.input` first,
/// so that a crash leaves it behind.
enum Fuzz {
    static let environment = ProcessInfo.processInfo.environment
    static func iterations(default value: Int) -> Int { environment["FUZZ_ITERATIONS"].flatMap(Int.init) ?? value }
    static let seed: UInt64 = environment["FUZZ_SEED"].flatMap { UInt64($0) } ?? 20_261_122

    /// A generator seeded from ``seed`` and a stream number (one per fuzz target).
    static func random(stream: UInt64) -> Xoshiro {
        var rng = Xoshiro(seed: (seed ^ 0x9E37_79B9_7F4A_7C15, stream &* 0xBF58_476D_1CE4_E5B9 | 1, 0xD1B5_4A32_D192_ED03, seed &+ stream))
        for _ in 0..<8 { _ = rng.next() }
        return rng
    }

    static let folder: String = {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/fuzz").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }()

    /// Keeps the last input of a target on disk (overwritten for every execution).
    final class InputLog: @unchecked Sendable {
        private let descriptor: Int32
        let path: String

        init(target: String) {
            path = Fuzz.folder + "/\(target).input"
            descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        }

        func record(_ text: String) {
            guard descriptor >= 0 else { return }
            _ = ftruncate(descriptor, 0)
            let bytes = Array(text.utf8)
            _ = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        }

        deinit { if descriptor >= 0 { close(descriptor) } }
    }

    /// Counts, timings and the slowest input of a run.
    struct Stats: CustomStringConvertible {
        let target: String
        var executions = 0
        var outcomes: [String: Int] = [:]
        var slowest: (seconds: Double, input: String) = (0, "")
        var start = Date()

        mutating func count(_ outcome: String, seconds: Double, input: String) {
            executions += 1
            outcomes[outcome, default: 0] += 1
            if seconds > slowest.seconds { slowest = (seconds, input) }
        }

        var description: String {
            let elapsed = Date().timeIntervalSince(start)
            let kinds = outcomes.sorted { $0.value > $1.value }.prefix(12).map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            return "fuzz \(target): \(executions) executions in \(String(format: "%.1f", elapsed)) s, seed \(Fuzz.seed), slowest \(String(format: "%.3f", slowest.seconds)) s; outcomes: \(kinds)"
        }
    }

    /// A token from `list`.
    static func pick<T>(_ list: [T], _ rng: inout Xoshiro) -> T { list[Int.random(in: 0..<list.count, using: &rng)] }
}

/// Mutates text the way a fuzzer does: byte flips, deletions, duplications, insertions of syntax
/// from a dictionary, line swaps and re-indentation, deep nesting, huge numbers, splices with
/// other seeds.
struct Mutator {
    let dictionary: [String]
    let seeds: [String]
    /// Values put in the place of a `name: value` line's value or name (structure-aware
    /// mutations, which keep the text valid YAML more often and so reach deeper checks).
    var values: [String] = []
    var names: [String] = []

    func mutate(_ text: String, _ rng: inout Xoshiro) -> String {
        var bytes = Array(text.utf8)
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
            let position = bytes.isEmpty ? 0 : Int.random(in: 0...bytes.count, using: &rng)
            let operation = Int.random(in: 0..<15, using: &rng)
            if operation >= 11 {
                var lines = String(decoding: bytes, as: UTF8.self).components(separatedBy: "\n")
                let index = Int.random(in: 0..<lines.count, using: &rng)
                let line = lines[index]
                switch operation {
                case 11: lines.insert(line, at: index)
                case 12 where lines.count > 1: lines.remove(at: index)
                case 13 where line.contains(": ") && !values.isEmpty:
                    let cut = line.range(of: ": ")!
                    lines[index] = line[..<cut.upperBound] + Fuzz.pick(values, &rng)
                case 14 where line.contains(":") && !names.isEmpty:
                    let cut = line.firstIndex(of: ":")!
                    let indent = line.prefix { $0 == " " || $0 == "-" }
                    lines[index] = indent + Fuzz.pick(names, &rng) + line[cut...]
                default: break
                }
                bytes = Array(lines.joined(separator: "\n").utf8)
                continue
            }
            switch operation {
            case 0 where !bytes.isEmpty:
                bytes[min(position, bytes.count - 1)] ^= UInt8(1 << Int.random(in: 0..<8, using: &rng))
            case 1 where !bytes.isEmpty:
                let end = min(bytes.count, position + Int.random(in: 1...24, using: &rng))
                bytes.removeSubrange(min(position, end)..<end)
            case 2 where !bytes.isEmpty:
                let start = Int.random(in: 0..<bytes.count, using: &rng)
                let end = min(bytes.count, start + Int.random(in: 1...64, using: &rng))
                bytes.insert(contentsOf: bytes[start..<end], at: position)
            case 3, 4, 5:
                bytes.insert(contentsOf: Array(Fuzz.pick(dictionary, &rng).utf8), at: position)
            case 6:
                var lines = String(decoding: bytes, as: UTF8.self).components(separatedBy: "\n")
                if lines.count > 1 { lines.swapAt(Int.random(in: 0..<lines.count, using: &rng), Int.random(in: 0..<lines.count, using: &rng)) }
                bytes = Array(lines.joined(separator: "\n").utf8)
            case 7:
                var lines = String(decoding: bytes, as: UTF8.self).components(separatedBy: "\n")
                let index = Int.random(in: 0..<lines.count, using: &rng)
                if Bool.random(using: &rng) { lines[index] = String(repeating: " ", count: Int.random(in: 1...4, using: &rng)) + lines[index] } else { lines[index] = String(lines[index].drop(while: { $0 == " " })) }
                bytes = Array(lines.joined(separator: "\n").utf8)
            case 8:
                let depth = Int.random(in: 1...(Bool.random(using: &rng) ? 40 : 3000), using: &rng)
                let (open, close) = Fuzz.pick([("[", "]"), ("{a: ", "}"), ("- ", ""), ("[{x: ", "}]")], &rng)
                let nested = String(repeating: open, count: depth) + "x" + (Bool.random(using: &rng) ? String(repeating: close, count: depth) : "")
                bytes.insert(contentsOf: Array(nested.utf8), at: position)
            case 9:
                let other = Array(Fuzz.pick(seeds, &rng).utf8)
                let cut = Int.random(in: 0...other.count, using: &rng)
                bytes = Array(bytes.prefix(position)) + Array(other.suffix(from: cut))
            default:
                bytes = Array(bytes.prefix(position))
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

// MARK: - The Keys file

/// Key material in the fuzz seeds: none of it may appear in an error, except inside the values
/// an error names by design (a key id, a database or key-file path, a variable name, a location).
enum KeysFuzzMaterial {
    static let passphrase = "FUZZMARK-pass-\(UUID().uuidString.prefix(8)) quoted ' \" ü"
    static let hexKey = "fa" + String((0..<62).map { _ in "0123456789abcdef".randomElement()! })
    static let envValue = "FUZZMARK-env-\(UUID().uuidString.prefix(8))"
    static let fileValue = "FUZZMARK-file-\(UUID().uuidString.prefix(8))"
    static let secrets = [passphrase, hexKey, envValue, fileValue, "FUZZMARK"]

    static let seeds: [String] = [
        """
        # A Keys file with every feature.
        databases:
          - path: app.sqlite            # relative
            keys:
              - id: "v1"
                plaintext: true
              - id: "2016"
                env: FUZZ_ENV
                legacy: true
              - id: "2021"
                passphrase: "\(passphrase.replacingOccurrences(of: "\"", with: "\\\""))"
                cipher: {kdf_iter: 10000, page_size: 4096, use_hmac: true}
              - id: "2024"
                hex: \(hexKey)
              - id: "2025"
                file: fuzz.key
                format: passphrase
          - path: "tenants/*.sqlite"
            keys:
              - id: t
                env: FUZZ_HEX
                format: hex
        """,
        "databases: [{path: a.sqlite, keys: [{id: k1, passphrase: '\(passphrase.replacingOccurrences(of: "'", with: "''"))'}, {id: k2, hex: \(hexKey)}]}]\n",
        """
        databases:
          - path: /abs/b.sqlite
            keys:
              - &first
                id: old
                passphrase: "\(passphrase.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\""))"
              - id: new
                hex: '\(hexKey)'
          - path: c.sqlite
            keys: [*first, {id: c, file: fuzz.key, format: passphrase}]
        """,
        "databases:\n  - path: d.sqlite\n    keys:\n      - id: only\n        passphrase: \(passphrase.replacingOccurrences(of: "'", with: "").replacingOccurrences(of: "\"", with: ""))\n",
    ]

    /// Values for structure-aware mutations.
    static let values: [String] = [
        "''", "\"\"", "\"\\0x\"", "\"a\\0b\"", "[]", "{}", "~", "null", "true", "false", "3000000000", "2147483647", "0", "-5", "1000", "4096",
        "65536", "131072", "1e400", ".inf", "\(hexKey)g", String(hexKey.dropLast()), hexKey.uppercased(), "FUZZ_UNSET_VARIABLE", "FUZZ_ENV", "FUZZ_HEX",
        "\(hexKey)", "/nonexistent/key", "fuzz.key", ".", "..", "binary", "hex", "passphrase", "pem", "*a", "&a x", "[a, b]", "{a: b}",
        "\"\(passphrase.replacingOccurrences(of: "\"", with: "\\\""))\"", "\"tenants/*.sqlite\"", "\"[\"", "app.sqlite", "'ü 🔑'", "|\n  multi\n  line",
    ]

    /// Names for structure-aware mutations: the real fields, near misses, and values in the place of names.
    static let names: [String] = [
        "id", "passphrase", "hex", "env", "file", "format", "plaintext", "cipher", "legacy", "kdf_iter", "page_size", "use_hmac",
        "databases", "keys", "path", "passprase", "Passphrase", "kdfIter", "pageSize", "extra", "passphrase:\(envValue)", "\(hexKey)",
    ]

    static let dictionary: [String] = [
        ":", ": ", " ", "\n", "\r\n", "\t", "- ", "-", "[", "]", "{", "}", ",", ", ", "&a ", "*a", "<<: *a\n", "!!str ", "!!binary ", "!!int ",
        "!custom ", "|\n", ">\n", "'", "\"", "\\", "\\0", "\\x00", "\\u0000", "\\U0001F511", "#", " # c", "...\n", "---\n", "%YAML 1.1\n",
        "%TAG ! tag:x,2000:\n", "? ", "~", "null", "true", "false", "yes", "0x7FFFFFFF", "99999999999999999999999999", "-1", "1e400",
        ".inf", ".nan", "0o777", "3000000000", "2147483648", "-9223372036854775808", "9223372036854775808", "\u{0}", "\u{FEFF}",
        "\u{202E}", "\u{2028}", "ü", "🔑", "\u{7F}", "\u{85}", "id: ", "passphrase: ", "hex: ", "env: ", "file: ", "format: ",
        "plaintext: ", "cipher: ", "legacy: ", "kdf_iter: ", "page_size: ", "use_hmac: ", "databases:", "keys: ", "path: ", "binary",
        "passphrase:\(hexKey)", "env: \(hexKey)", "{passphrase:\(envValue)}", "\(passphrase): 1", "- id: x\n  hex: \(hexKey)g\n",
        "file: /etc/passwd", "file: ../../x", "path: \"\"", "keys: []", "format: binary", "plaintext: false", "cipher: {page_size: 1000}",
    ]
}

/// Values an error names by design; a marker inside them is not a leak.
private func namedValues(of error: any Error) -> [String] {
    let allowed: Set<String> = ["keyID", "database", "sameAs", "variable", "path", "keysFile", "location", "pattern", "configured", ".0", "source"]
    let mirror = Mirror(reflecting: error)
    guard let payload = mirror.children.first?.value else { return [] }
    let children = Mirror(reflecting: payload).displayStyle == .tuple ? Array(Mirror(reflecting: payload).children) : [(label: ".0" as String?, value: payload)]
    var values: [String] = []
    for child in children {
        // An unknown field's name is shown only when it looks like a field name; a value typed in
        // its place must be hidden, so it is not "named by design" then.
        let isShownFieldName = child.label == "field" && (child.value as? String).map { KeyConfigurationError.shownFieldName($0) == $0 } == true
        guard allowed.contains(child.label ?? "") || isShownFieldName else { continue }
        if let text = child.value as? String { values.append(text) }
        if let list = child.value as? [String] { values += list }
    }
    return values.sorted { $0.count > $1.count }
}

/// The error's description without the values it names by design.
private func unnamedText(of error: any Error) -> String {
    var text = "\(error)"
    for value in namedValues(of: error) where !value.isEmpty { text = text.replacingOccurrences(of: value, with: "<named>") }
    return text
}

/// One execution: parse, then resolve every entry's key list. Returns the outcome's name; records
/// an issue when an error shows key material.
private func runKeysFile(_ text: String, folder: String, environment: [String: String]) -> String {
    func check(_ error: any Error) -> String {
        let shown = unnamedText(of: error)
        let leaks = KeysFuzzMaterial.secrets.filter { shown.contains($0) || shown.contains($0.prefix(24)) }
        if !leaks.isEmpty {
            Issue.record("key material in an error: \(error)\n--- input:\n\(text)")
        }
        return ErrorKind.name(of: error)
    }
    do {
        let file = try KeysFile(yaml: text, path: folder + "/Keys", baseDirectory: folder)
        var dumped = ""
        dump(file, to: &dumped)
        if KeysFuzzMaterial.secrets.contains(where: { dumped.contains($0) }) && !namedInEntries(file).contains(where: { name in KeysFuzzMaterial.secrets.contains { name.contains($0) } }) {
            Issue.record("key material in a dump of a KeysFile\n--- input:\n\(text)")
        }
        var outcome = "loaded"
        for entry in file.entries {
            do {
                let list = try file.keyList(forDatabase: entry.path, environment: environment)
                var shown = "\(list)"
                var dumpedList = ""
                dump(list, to: &dumpedList)
                shown += dumpedList
                // The database and the key ids are named by design.
                for name in ([list.database] + list.ids).sorted(by: { $0.count > $1.count }) where !name.isEmpty {
                    // As printed, and as dump() escapes it inside quotes.
                    shown = shown.replacingOccurrences(of: name, with: "<named>")
                        .replacingOccurrences(of: String(name.debugDescription.dropFirst().dropLast()), with: "<named>")
                }
                if KeysFuzzMaterial.secrets.contains(where: { shown.contains($0) }) {
                    Issue.record("key material in a KeyList description or dump: \(shown)\n--- input:\n\(text)")
                }
            } catch {
                outcome = check(error)
            }
        }
        return outcome
    } catch {
        return check(error)
    }
}

private func namedInEntries(_ file: KeysFile) -> [String] {
    file.entries.flatMap { entry in
        [entry.path, entry.configuredPath] + entry.keys.flatMap { key -> [String] in
            var names = [key.id]
            if case .environment(let variable, _) = key.source { names.append(variable) }
            if case .file(let path, _) = key.source { names.append(path) }
            return names
        }
    }
}

// MARK: - SQL migration files

/// Lines a migration's up or down section may hold (none of them a `-- down` marker line).
private let sqlLines = [
    "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);", "INSERT INTO t(b) VALUES ('-- down');", "-- a comment", "--downstream", "-- down below",
    "/* -- down */", "", "   ", "\t", "UPDATE t SET b = 'é' WHERE a = 1;", "DROP TABLE t;", "CREATE INDEX t_b ON t(b);", "SELECT 1;",
    "'; DROP TABLE x; --", "ü 🔑 \u{202E}", "  -- down -- not a marker", "BEGIN;", "-- up", "x -- down", "\u{00A0}", "VALUES (1), (2);",
]

/// The parser's rule for a marker line, as documented: `-- down` or `--down`, any case, surrounded by spaces or tabs.
private func isMarkerLine(_ line: String) -> Bool {
    let marker = line.trimmingCharacters(in: .whitespaces).lowercased()
    return marker == "-- down" || marker == "--down"
}

@Suite("Fuzz: Keys file parser and SQL migration parser")
struct FuzzTests {
    @Test("mutated Keys files: never a crash or hang; a KeysFile or a typed error that shows no key material")
    func keysFile() throws {
        let directory = TemporaryDirectory("fuzz-keys")
        _ = TestKeys.writeKeyFile(KeysFuzzMaterial.fileValue, in: directory, name: "fuzz.key")
        let environment = ["FUZZ_ENV": KeysFuzzMaterial.envValue, "FUZZ_HEX": KeysFuzzMaterial.hexKey]
        let mutator = Mutator(dictionary: KeysFuzzMaterial.dictionary, seeds: KeysFuzzMaterial.seeds,
                              values: KeysFuzzMaterial.values, names: KeysFuzzMaterial.names)
        let log = Fuzz.InputLog(target: "keys-file")
        var rng = Fuzz.random(stream: 1)
        var stats = Fuzz.Stats(target: "Keys file")
        // The seeds themselves load.
        for seed in KeysFuzzMaterial.seeds {
            #expect(runKeysFile(seed, folder: directory.path, environment: environment) == "loaded", "seed does not load:\n\(seed)")
        }
        for iteration in 0..<Fuzz.iterations(default: 2500) {
            var text = Fuzz.pick(KeysFuzzMaterial.seeds, &rng)
            for _ in 0..<Int.random(in: 1...2, using: &rng) { text = mutator.mutate(text, &rng) }
            log.record(text)
            let started = Date()
            let outcome: String
            if iteration % 100 == 0 {
                // Through the file: bytes that are not UTF-8 too.
                var bytes = Array(text.utf8)
                if !bytes.isEmpty { bytes[Int.random(in: 0..<bytes.count, using: &rng)] = 0xFF }
                _ = FileManager.default.createFile(atPath: directory.file("Keys"), contents: Data(bytes), attributes: [.posixPermissions: 0o600])
                do {
                    _ = try KeysFile.load(path: directory.file("Keys"))
                    outcome = "loaded"
                } catch {
                    outcome = ErrorKind.name(of: error)
                }
            } else {
                outcome = runKeysFile(text, folder: directory.path, environment: environment)
            }
            let seconds = Date().timeIntervalSince(started)
            #expect(seconds < 5, "a Keys file took \(seconds) s (input in \(log.path))")
            stats.count(outcome, seconds: seconds, input: text)
        }
        print(stats)
        #expect(stats.outcomes.count > 5, "the mutations reach too few outcomes: \(stats.outcomes)")
    }

    @Test("mutated SQL migration texts and file names: sections and identifiers never crash; registering gives a migration or a typed error")
    func migrationText() throws {
        var seeds = [
            "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT);\n-- down\nDROP TABLE users;\n",
            "-- 0002_add_email.sql\nALTER TABLE users ADD COLUMN email TEXT;\n\n  -- DOWN  \nCREATE TABLE users_old AS SELECT id, name FROM users;\n",
            "INSERT INTO t VALUES ('--down');\n/* comment */\n--down\n",
        ]
        seeds.append(seeds[0].replacingOccurrences(of: "\n", with: "\r\n"))
        let mutator = Mutator(dictionary: sqlLines + ["-- down", "--down", "\r\n", "\r", "\u{FEFF}", "\u{2028}", "\u{0}", "\n-- down\n", "_", ".sql", "0001_", "١٢٣"], seeds: seeds)
        let log = Fuzz.InputLog(target: "migration-text")
        var rng = Fuzz.random(stream: 2)
        var stats = Fuzz.Stats(target: "SQL migration text")
        for _ in 0..<Fuzz.iterations(default: 3000) {
            var text = Fuzz.pick(seeds, &rng)
            for _ in 0..<Int.random(in: 1...3, using: &rng) { text = mutator.mutate(text, &rng) }
            log.record(text)
            let started = Date()
            let (up, down) = SQLMigrationFile.sections(of: text)
            #expect(up == up.trimmingCharacters(in: .whitespacesAndNewlines) && down.map { !$0.isEmpty && $0 == $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? true)
            var migrator = DatabaseMigrator()
            var outcome = "registered"
            do { try migrator.registerSQLMigration("0001_fuzz", sql: text) } catch { outcome = ErrorKind.name(of: error) }
            let name = String(text.prefix(40)) + ".sql"
            if let identifier = SQLMigrationFile.identifier(forFileName: name) {
                #expect(name == identifier + ".sql")
                outcome += ", named"
            }
            stats.count(outcome, seconds: Date().timeIntervalSince(started), input: text)
        }
        print(stats)
    }

    @Test("a migration file rendered from an up and a down part (LF or CRLF, any marker spelling) parses back into the same parts")
    func migrationRoundTrip() async {
        let part = Gen<String?>.element(of: sqlLines).compactMap { $0 }.array(of: 0...8).map { $0.joined(separator: "\n") }
        let ending = Gen<String?>.element(of: ["\n", "\r\n"]).compactMap { $0 }
        let marker = Gen<String?>.element(of: ["-- down", "--down", "-- DOWN", "  -- Down  ", "\t--down\t"]).compactMap { $0 }
        await propertyCheck(count: Fuzz.iterations(default: 500), input: part, part, ending, marker) { up, down, ending, marker in
            let text = (up + "\n" + marker + "\n" + down).replacingOccurrences(of: "\n", with: ending)
            let (parsedUp, parsedDown) = SQLMigrationFile.sections(of: text)
            let expectedDown = down.trimmingCharacters(in: .whitespacesAndNewlines)
            // The parts keep their own line endings; compare them as LF text.
            let lf = { (text: String) in text.replacingOccurrences(of: "\r\n", with: "\n") }
            #expect(lf(parsedUp) == up.trimmingCharacters(in: .whitespacesAndNewlines))
            #expect(parsedDown.map(lf) == (expectedDown.isEmpty ? nil : expectedDown))
        }
    }

    @Test("migration file names: <digits>_<name>.sql gives its identifier, anything else nil; identifier order is a strict weak order")
    func migrationNamesAndOrder() async {
        let digits = Gen<Character?>.element(of: Array("0123456789")).compactMap { $0 }.string(of: 1...30)
        let nameCharacters = Array("abcxyz_-.0123456789 éü🔑١٢") + ["\u{301}"]
        let name = Gen<Character?>.element(of: nameCharacters).compactMap { $0 }.string(of: 1...20)
        await propertyCheck(count: Fuzz.iterations(default: 1000), input: digits, name) { version, name in
            #expect(SQLMigrationFile.identifier(forFileName: "\(version)_\(name).sql") == "\(version)_\(name)")
            #expect(SQLMigrationFile.identifier(forFileName: "_\(name).sql") == nil)
            #expect(SQLMigrationFile.identifier(forFileName: "\(version)_\(name).txt") == nil)
        }
        let numbers = ["1", "01", "001", "2", "10", "0", "", "١", "٢", "½", "99999999999999999999999", "1\u{301}", "0\u{301}"]
        let identifiers = numbers.flatMap { number in ["_x", "_y", "", "x", "_", "_x\u{301}"].map { number + $0 } }
        let identifier = Gen<String?>.element(of: identifiers).compactMap { $0 }
        await propertyCheck(count: Fuzz.iterations(default: 1000), input: identifier, identifier, identifier) { a, b, c in
            let less = MigrationOrder.precedes
            #expect(!less(a, a), "not irreflexive: \(a)")
            #expect(!(less(a, b) && less(b, a)), "not asymmetric: \(a), \(b)")
            if less(a, b) && less(b, c) { #expect(less(a, c), "not transitive: \(a) < \(b) < \(c)") }
            // Incomparability is transitive too (needed for a deterministic sort).
            let equivalent = { (x: String, y: String) in !less(x, y) && !less(y, x) }
            if equivalent(a, b) && equivalent(b, c) { #expect(equivalent(a, c), "incomparability not transitive: \(a), \(b), \(c)") }
        }
    }

    @Test("folders of fuzzed migration files: registering gives migrations or a typed error naming the file")
    func migrationFolders() throws {
        var rng = Fuzz.random(stream: 3)
        var stats = Fuzz.Stats(target: "SQL migration folder")
        let log = Fuzz.InputLog(target: "migration-folder")
        let names = ["0001_a.sql", "0002_b.sql", "10_c.sql", "2_d.sql", "x.sql", "0003_.sql", "README.md", ".0004_hidden.sql", "0005_e.SQL", "0006 f.sql", "0007_ü.sql"]
        let contents = ["CREATE TABLE a(x);", "-- down\nDROP TABLE a;", "", "\u{FEFF}SELECT 1;", "SELECT 1;\r\n--down\r\nSELECT 2;"]
        for _ in 0..<max(1, Fuzz.iterations(default: 1000) / 20) {
            let directory = TemporaryDirectory("fuzz-migrations")
            var files: [String] = []
            for _ in 0..<Int.random(in: 0...5, using: &rng) {
                let name = Fuzz.pick(names, &rng)
                var data = Data(Fuzz.pick(contents, &rng).utf8)
                if Int.random(in: 0..<8, using: &rng) == 0 { data.append(0xFF) }
                _ = FileManager.default.createFile(atPath: directory.file(name), contents: data)
                files.append(name)
            }
            log.record(files.joined(separator: ","))
            var migrator = DatabaseMigrator()
            do {
                try migrator.registerSQLMigrations(in: directory.path)
                stats.count("registered \(migrator.migrations.count)", seconds: 0, input: "")
                #expect(migrator.migrations.map(\.identifier) == migrator.migrations.map(\.identifier).sorted(by: MigrationOrder.precedes))
            } catch {
                stats.count(ErrorKind.name(of: error), seconds: 0, input: "")
                switch error {
                case .invalidFileName(let path), .fileUnreadable(let path): #expect(path.hasPrefix(directory.path))
                case .emptyMigration(let identifier), .duplicateIdentifier(let identifier): #expect(files.contains { $0.hasPrefix(identifier) })
                default: Issue.record("unexpected \(error)")
                }
            }
        }
        print(stats)
    }
}
