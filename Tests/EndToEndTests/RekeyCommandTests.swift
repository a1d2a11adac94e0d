import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// A folder with a Keys file for `app.sqlite` and a database made by the sqlcipher shell with one
/// of the keys.
struct CLIFixture {
    let directory = TemporaryDirectory("cli")
    let ring: TestKeyring
    let path: String

    init(kinds: [SourceKind] = [.passphrase, .fileHex, .envPassphrase], madeWith index: Int? = 0) throws {
        ring = TestKeyring(kinds, in: directory)
        path = directory.file("app.sqlite")
        _ = FileManager.default.createFile(atPath: directory.file("Keys"), contents: Data(ring.yaml(databasePath: "app.sqlite").utf8), attributes: [.posixPermissions: 0o600])
        if let index { try Fixture.createWithShell(at: path, key: ring.keys[index].shellKey, rows: 50) }
    }

    func rekey(_ arguments: [String], environment extra: [String: String] = [:]) throws -> ProcessResult {
        let result = try RekeyCLI.run(arguments, in: directory, environment: ring.environment.merging(extra) { $1 })
        assertNoSecrets(in: result)
        return result
    }

    /// No key of the ring appears in anything the command printed.
    func assertNoSecrets(in result: ProcessResult, sourceLocation: SourceLocation = #_sourceLocation) {
        for key in ring.keys {
            #expect(!result.stdout.contains(key.secret) && !result.stderr.contains(key.secret), "key \(key.id) was printed", sourceLocation: sourceLocation)
            #expect(!result.stdout.contains("MARKER") && !result.stderr.contains("MARKER"), sourceLocation: sourceLocation)
        }
    }
}

@Suite("rekey command", .ownThread)
struct RekeyCommandTests {
    @Test("rotates a file on an old key, reports it, and a second run finds it current")
    func rotate() throws {
        let fixture = try CLIFixture()
        let first = try fixture.rekey(["--db", "app.sqlite", "--keys", "Keys"])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.hasPrefix("app.sqlite: opened with key \"k1\", rotated to \"k3\" in "))
        #expect(try SQLCipherShell.opens(fixture.path, with: fixture.ring.keys[2].shellKey))
        #expect(try !SQLCipherShell.opens(fixture.path, with: fixture.ring.keys[0].shellKey))
        let second = try fixture.rekey(["--db", "app.sqlite"])  // ./Keys by default
        #expect(second.status == 0)
        #expect(second.stdout.hasPrefix("app.sqlite: already on the current key \"k3\" (1 key(s) tried"))
    }

    @Test("--check writes nothing and exits 3 when rotation is needed, 0 when current")
    func check() throws {
        let fixture = try CLIFixture()
        let snapshot = FileSnapshot(fixture.path)
        let before = try fixture.rekey(["--db", "app.sqlite", "--check"])
        #expect(before.status == 3)
        #expect(before.stdout == "app.sqlite: on key \"k1\"; needs rotation to \"k3\"\n")
        #expect(FileSnapshot(fixture.path) == snapshot)
        #expect(try fixture.rekey(["--db", "app.sqlite"]).status == 0)
        let after = try fixture.rekey(["--db", "app.sqlite", "--check"])
        #expect(after.status == 0)
        #expect(after.stdout == "app.sqlite: on the current key \"k3\"\n")
    }

    @Test("--json prints one machine-readable document")
    func json() throws {
        let fixture = try CLIFixture(madeWith: 1)
        let result = try fixture.rekey(["--db", "app.sqlite", "--json", "--keys", fixture.directory.file("Keys")])
        #expect(result.status == 0)
        let document = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(document["exitCode"] as? Int == 0)
        let database = try #require((document["databases"] as? [[String: Any]])?.first)
        #expect(database["status"] as? String == "rotated")
        #expect(database["openedWithKeyID"] as? String == "k2")
        #expect(database["keysTried"] as? [String] == ["k3", "k2"])
        let rotation = try #require(database["rotation"] as? [String: Any])
        #expect(rotation["toKeyID"] as? String == "k3")
        #expect((rotation["totalMs"] as? Double ?? 0) > 0)

        let failed = try fixture.rekey(["--db", "missing.sqlite", "--json"])
        #expect(failed.status == 78)
        let failure = try #require(try JSONSerialization.jsonObject(with: Data(failed.stdout.utf8)) as? [String: Any])
        let entry = try #require((failure["databases"] as? [[String: Any]])?.first)
        #expect(entry["status"] as? String == "failed")
        #expect((entry["error"] as? [String: Any])?["kind"] as? String == "keys")
    }

    @Test("the Keys file can come from REKEY_KEYS_FILE")
    func keysFileVariable() throws {
        let fixture = try CLIFixture()
        try FileManager.default.moveItem(atPath: fixture.directory.file("Keys"), toPath: fixture.directory.file("Elsewhere"))
        #expect(try fixture.rekey(["--db", "app.sqlite"]).status == 78)
        #expect(try fixture.rekey(["--db", "app.sqlite"], environment: ["REKEY_KEYS_FILE": "Elsewhere"]).status == 0)
    }

    @Test("exit codes: 65 no key opens, 66 missing database, 74 file-size limit, 75 busy, 77 key file permissions, 78 Keys file problems")
    func exitCodes() throws {
        // 66: listed in the Keys file but missing.
        let missing = try CLIFixture(madeWith: nil)
        let noFile = try missing.rekey(["--db", "app.sqlite"])
        #expect(noFile.status == 66)
        #expect(!FileManager.default.fileExists(atPath: missing.path))

        // 65: a file none of the keys opens, and a plaintext file.
        let stranger = try CLIFixture(madeWith: nil)
        try Fixture.createWithShell(at: stranger.path, key: .passphrase("not in the list"), rows: 3)
        let snapshot = FileSnapshot(stranger.path)
        let wrong = try stranger.rekey(["--db", "app.sqlite"])
        #expect(wrong.status == 65)
        #expect(wrong.stderr.contains("tried: k3, k2, k1"))
        #expect(FileSnapshot(stranger.path) == snapshot)
        let plain = try CLIFixture(madeWith: nil)
        _ = try ProcessRunner.run("/usr/bin/sqlite3", [plain.path], input: "CREATE TABLE t(a);")
        #expect(try plain.rekey(["--db", "app.sqlite"]).status == 65)

        // 78: Keys file missing, not YAML, database not listed, unset variable.
        let config = try CLIFixture()
        #expect(try config.rekey(["--db", "app.sqlite", "--keys", "nope"]).status == 78)
        _ = FileManager.default.createFile(atPath: config.directory.file("Bad"), contents: Data("databases: [\n".utf8))
        #expect(try config.rekey(["--db", "app.sqlite", "--keys", "Bad"]).status == 78)
        #expect(try config.rekey(["--db", "other.sqlite"]).status == 78)
        let unset = try RekeyCLI.run(["--db", "app.sqlite"], in: config.directory)  // no key variables
        #expect(unset.status == 78)
        #expect(unset.stderr.contains("which is not set"))

        // 77: a key file readable by others.
        let open = try CLIFixture(kinds: [.fileHex, .hex])
        chmod(open.directory.file("k1.key"), 0o644)
        let permissive = try open.rekey(["--db", "app.sqlite"])
        #expect(permissive.status == 77)
        #expect(permissive.stderr.contains("chmod 600"))

        // 75: another process holds the write lock.
        let busy = try CLIFixture(kinds: [.hex, .hex])
        let holder = try EncryptedDatabase(path: busy.path, keys: busy.ring.only(0, database: busy.path))
        try holder.writeWithoutTransaction { db in try db.execute("BEGIN EXCLUSIVE; INSERT INTO audit(note) VALUES ('held')") }
        let locked = try busy.rekey(["--db", "app.sqlite", "--busy-timeout", "0.2"])
        #expect(locked.status == 75)
        try holder.writeWithoutTransaction { try $0.execute("ROLLBACK") }
        #expect(try SQLCipherShell.opens(busy.path, with: busy.ring.keys[0].shellKey))

        // 74: the process may not write a journal as large as the database (ulimit -f).
        let limited = try CLIFixture(kinds: [.hex, .hex])
        let before = FileSnapshot(limited.path)
        let full = try RekeyCLI.runWrapped("ulimit -f 4;", ["--db", "app.sqlite"], in: limited.directory, environment: limited.ring.environment)
        #expect(full.status == 74, "\(full.stderr)")
        #expect(full.stderr.contains("file-size limit"))
        #expect(FileSnapshot(limited.path) == before)
    }

    @Test("usage errors exit 64; key material on the command line is refused and never echoed")
    func usage() throws {
        let fixture = try CLIFixture()
        let secret = "SECRET-\(UUID().uuidString)"
        for arguments in [["--db", "app.sqlite", "--key", secret], ["--db", "app.sqlite", "--passphrase=\(secret)"],
                          ["--db", "app.sqlite", "--hex", secret], ["--db", "app.sqlite", secret], [secret], []] {
            let result = try fixture.rekey(arguments)
            #expect(result.status == 64, "\(arguments.count) arguments")
            #expect(!result.stdout.contains(secret) && !result.stderr.contains(secret), "the secret was echoed")
        }
        let keyLike = try fixture.rekey(["--db", "app.sqlite", "--key", secret])
        #expect(keyLike.stderr.contains("not accepted on the command line"))
        #expect(try SQLCipherShell.opens(fixture.path, with: fixture.ring.keys[0].shellKey))
        let help = try fixture.rekey(["--help"])
        #expect(help.status == 0 && help.stdout.contains("Exit codes:"))
    }

    @Test("no key material in any output, even with --verbose logging")
    func noSecretsVerbose() throws {
        let fixture = try CLIFixture(kinds: [.passphrase, .hex, .envHex, .filePassphrase])
        var outputs: [String] = []
        for arguments in [["--check"], ["--verbose"], ["--verbose", "--json"], ["--verbose", "--check"]] {
            let result = try fixture.rekey(["--db", "app.sqlite"] + arguments)
            outputs += [result.stdout, result.stderr]
        }
        // The runs did print: a rotation, its verbose log, JSON.
        let printed = outputs.joined(separator: "\n")
        #expect(printed.contains("opened database") && printed.contains("rotated to \"k4\"") && printed.contains("{"), "\(printed)")
        // No key of the ring, in any form it could be printed in (either case, half of it, the hex of its bytes).
        #expect(fixture.ring.keys.count == 4)
        for key in fixture.ring.keys {
            let forms = SecretScan.forms(of: key.secret)
            #expect(!forms.isEmpty)
            for form in forms { #expect(!printed.contains(form), "key \(key.id) was printed as \"\(form)\"") }
        }
        #expect(TestSecrets.firstLeak(in: outputs) == nil)
    }

    @Test("a read-only file or folder (as an unprivileged user) is exit 77 with nothing changed",
          .enabled(if: OtherUser.canRunCommands))
    func readOnly() throws {
        let fixture = try CLIFixture(kinds: [.hex, .hex])
        // The Keys file holds key material: nobody's own, readable by nobody else.
        chown(fixture.directory.file("Keys"), 65534, 65534)
        chmod(fixture.directory.file("Keys"), 0o600)
        let asNobody = OtherUser.commandPrefix
        // The file belongs to root: nobody can read it but not write it. Its mode is set here, not
        // left to the umask the suite runs under (077 would make it unreadable for nobody).
        #expect(chmod(fixture.path, 0o644) == 0)
        var snapshot = FileSnapshot(fixture.path)
        let file = try RekeyCLI.runWrapped(asNobody, ["--db", "app.sqlite"], in: fixture.directory)
        #expect(file.status == 77, "\(file.stderr)")
        #expect(file.stderr.contains("cannot write"))
        #expect(FileSnapshot(fixture.path) == snapshot)
        // The file belongs to nobody, the folder does not: no journal can be created beside it.
        chown(fixture.path, 65534, 65534)
        snapshot = FileSnapshot(fixture.path)
        let folder = try RekeyCLI.runWrapped(asNobody, ["--db", "app.sqlite"], in: fixture.directory)
        #expect(folder.status == 77, "\(folder.stderr)")
        #expect(folder.stderr.contains("folder"))
        #expect(FileSnapshot(fixture.path) == snapshot)
        #expect(try SQLCipherShell.opens(fixture.path, with: fixture.ring.keys[0].shellKey))
    }
}
