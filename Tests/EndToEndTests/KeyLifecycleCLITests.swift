import EncryptedSQLite
import Foundation
import Testing
import TestSupport

@Suite("rekey: the key lifecycle (keys new, backup, rotate, retire-check)", .ownThread)
struct KeyLifecycleCLITests {
    static let keysText = """
        # The fleet's keys. Comments and layout survive `rekey keys new`.
        databases:
          - path: "data/*.sqlite"       # the app's databases
            keys:
              - id: k1
                file: k1.key
                format: hex
          - path: "backups/*.sqlite"    # their backups share the key list
            keys:
              - id: k1
                file: k1.key
                format: hex

        """

    @Test("new key → rotate the databases → retire-check fails while a backup is old → rotate all → retire-check passes → drop the old key")
    func lifecycle() throws {
        let directory = TemporaryDirectory("lifecycle")
        let k1 = TestKeys.hex()
        _ = TestKeys.writeKeyFile(k1 + "\n", in: directory, name: "k1.key")
        _ = FileManager.default.createFile(atPath: directory.file("Keys"), contents: Data(Self.keysText.utf8), attributes: [.posixPermissions: 0o600])
        for folder in ["data", "backups"] { try FileManager.default.createDirectory(atPath: directory.file(folder), withIntermediateDirectories: true) }
        for name in ["a", "b", "c"] {
            try Fixture.createWithShell(at: directory.file("data/\(name).sqlite"), key: .hex(k1), rows: 50, walMode: name == "c")
        }
        let transcript = RekeyTranscript(in: directory, secrets: [k1])
        defer { print("lifecycle transcript:\n" + transcript.text) }

        _ = try transcript.rekey(["backup", "--db", "data/a.sqlite", "--to", "backups/a-before.sqlite"], expect: 0)
        let made = try transcript.rekey(["keys", "new", "--for", "data/*.sqlite", "--for", "backups/*.sqlite", "--id", "k2", "--format", "hex", "--json"], expect: 0)
        let document = try #require(try JSONSerialization.jsonObject(with: Data(made.stdout.utf8)) as? [String: Any])
        #expect(document["keyID"] as? String == "k2")
        #expect(FileSystemMode.of(directory.file("k2.key")) == 0o600)
        let k2 = try String(contentsOfFile: directory.file("k2.key"), encoding: .utf8).trimmingCharacters(in: .newlines)
        #expect(k2.count == 64 && !made.stdout.contains(k2) && !made.stderr.contains(k2), "the new key is never printed")
        let keysAfter = try String(contentsOfFile: directory.file("Keys"), encoding: .utf8)
        #expect(keysAfter.hasPrefix("# The fleet's keys. Comments and layout survive `rekey keys new`.\n"))
        #expect(!keysAfter.contains(k2), "the Keys file names the key file, never the key")

        _ = try transcript.rekey(["--db", "data/a.sqlite", "--db", "data/b.sqlite", "--db", "data/c.sqlite"], expect: 0)
        let blocked = try transcript.rekey(["keys", "retire-check", "--key", "k1", "--all", "--backups", "backups/*.sqlite"], expect: 3)
        #expect(blocked.stdout.contains("backups/a-before.sqlite: STILL ON \"k1\""))
        #expect(blocked.stdout.contains("1 of 4 file(s)"))

        _ = try transcript.rekey(["--all"], expect: 0)
        let passed = try transcript.rekey(["keys", "retire-check", "--key", "k1", "--all", "--backups", "backups/*.sqlite", "--json"], expect: 0)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(passed.stdout.utf8)) as? [String: Any])
        #expect((report["findings"] as? [[String: Any]])?.count == 4)

        // Drop the old key: its entries go from the Keys file, its key file is destroyed.
        let dropped = keysAfter.replacingOccurrences(of: "      - id: k1\n        file: k1.key\n        format: hex\n", with: "")
        #expect(dropped != keysAfter)
        _ = FileManager.default.createFile(atPath: directory.file("Keys"), contents: Data(dropped.utf8), attributes: [.posixPermissions: 0o600])
        try FileManager.default.removeItem(atPath: directory.file("k1.key"))
        transcript.note("$ (remove the k1 entries from Keys; shred k1.key)")
        let status = try transcript.rekey(["status", "--all", "--json"], expect: 0)
        let states = try #require((try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])?["databases"] as? [[String: Any]])
        #expect(states.count == 4 && states.allSatisfy { $0["openedWithKeyID"] as? String == "k2" })
        #expect(try !SQLCipherShell.opens(directory.file("backups/a-before.sqlite"), with: .hex(k1)))
        #expect(try SQLCipherShell.opens(directory.file("backups/a-before.sqlite"), with: .hex(k2)))
    }

    @Test("backup refusals: an existing target, a target the Keys file does not cover; keys new refuses a taken id; nothing changes")
    func refusals() throws {
        let directory = TemporaryDirectory("lifecycle-bad")
        let k1 = TestKeys.hex()
        _ = TestKeys.writeKeyFile(k1 + "\n", in: directory, name: "k1.key")
        _ = FileManager.default.createFile(atPath: directory.file("Keys"), contents: Data(Self.keysText.utf8), attributes: [.posixPermissions: 0o600])
        for folder in ["data", "backups"] { try FileManager.default.createDirectory(atPath: directory.file(folder), withIntermediateDirectories: true) }
        try Fixture.createWithShell(at: directory.file("data/a.sqlite"), key: .hex(k1), rows: 10)
        _ = FileManager.default.createFile(atPath: directory.file("backups/taken.sqlite"), contents: Data("keep".utf8))

        let exists = try RekeyCLI.run(["backup", "--db", "data/a.sqlite", "--to", "backups/taken.sqlite"], in: directory)
        #expect(exists.status == 73, "\(exists.stderr)")
        #expect(TestFiles.contents(directory.file("backups/taken.sqlite")) == Data("keep".utf8))
        let uncovered = try RekeyCLI.run(["backup", "--db", "data/a.sqlite", "--to", "elsewhere.sqlite"], in: directory)
        #expect(uncovered.status == 78, "\(uncovered.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.file("elsewhere.sqlite")))
        let taken = try RekeyCLI.run(["keys", "new", "--for", "data/*.sqlite", "--id", "k1"], in: directory)
        #expect(taken.status == 78, "\(taken.stderr)")
        #expect(try String(contentsOfFile: directory.file("Keys"), encoding: .utf8) == Self.keysText)
        #expect(!FileManager.default.fileExists(atPath: directory.file("k1.key.new")))
    }

    @Test("keys new ends with the command that rotates what it was given (the Keys file, and the one database or --all), and that command runs as printed, here and from another folder")
    func newKeyHint() throws {
        let fixture = try CLIFixture()
        let here = try fixture.rekey(["keys", "new", "--keys", "Keys", "--for", "app.sqlite", "--id", "k4", "--format", "hex"])
        #expect(here.status == 0, "\(here.stderr)")
        // The database as the Keys file names it (from its folder), absolute: the command runs from anywhere.
        #expect(here.stdout.hasSuffix("; rotate with: rekey --keys Keys --db \(fixture.path)\n"), "\(here.stdout)")
        let rotated = try fixture.rekey(["--keys", "Keys", "--db", fixture.path])
        #expect(rotated.status == 0 && rotated.stdout.contains("rotated to \"k4\""), "\(rotated.stdout) \(rotated.stderr)")

        // From another working directory the database is named as the Keys file names it: from its folder.
        let elsewhere = TemporaryDirectory("cli-hint-elsewhere")
        let keysFile = fixture.directory.file("Keys")
        let there = try RekeyCLI.run(["keys", "new", "--keys", keysFile, "--for", "app.sqlite", "--id", "k5", "--format", "hex"], in: elsewhere,
                                   environment: fixture.ring.environment)
        #expect(there.status == 0, "\(there.stderr)")
        #expect(there.stdout.hasSuffix("; rotate with: rekey --keys \(keysFile) --db \(fixture.path)\n"), "\(there.stdout)")
        let rotatedThere = try RekeyCLI.run(["--keys", keysFile, "--db", fixture.path], in: elsewhere, environment: fixture.ring.environment)
        #expect(rotatedThere.status == 0 && rotatedThere.stdout.contains("rotated to \"k5\""), "\(rotatedThere.stdout) \(rotatedThere.stderr)")
        #expect(try SQLCipherShell.opens(fixture.path, with: .hex(String(contentsOfFile: fixture.directory.file("k5.key"), encoding: .utf8).trimmingCharacters(in: .newlines))))
    }
}

enum FileSystemMode {
    static func of(_ path: String) -> mode_t? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return status.st_mode & 0o7777
    }
}
