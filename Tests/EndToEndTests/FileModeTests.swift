import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// The umask is process-wide and tests run in parallel, so it is only ever set in a child
/// process: `crash-harness modes` for the library, `rekey` for the CLI.
@Suite("File modes: new files are owner-only under any umask; a rotation keeps a file's mode", .ownThread)
struct FileModeTests {

    /// Runs `crash-harness modes` under `umask` on `database` and returns the modes it printed,
    /// by label (`db`, `-journal`, `-wal`, `-shm`).
    static func harnessModes(umask: String, database: String, journalMode: String, key: String) throws -> [String: String] {
        let result = try ProcessRunner.run(
            "/bin/sh", ["-c", "umask \(umask); exec \"$0\" modes \"$1\" \(journalMode)", BuiltProduct.crashHarness, database],
            environment: ProcessRunner.withPATH(["HARNESS_KEY_HEX": key]))
        #expect(result.status == 0, "\(result.stderr)")
        var modes: [String: String] = [:]
        for line in result.stdout.split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count == 2 { modes[String(parts[0])] = String(parts[1]) }
        }
        return modes
    }

    static func mode(of path: String) -> String? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return String(status.st_mode & 0o7777, radix: 8)
    }

    @Test("a new database and its -journal, -wal and -shm are 0600 under umask 022 and 077",
          arguments: ["022", "077"], ["wal", "delete"])
    func newDatabase(umask: String, journalMode: String) throws {
        let directory = TemporaryDirectory("modes")
        let database = directory.file("new.sqlite")
        let modes = try Self.harnessModes(umask: umask, database: database, journalMode: journalMode, key: TestKeys.hex())
        let expected = journalMode == "wal" ? ["db": "600", "-wal": "600", "-shm": "600"] : ["db": "600", "-journal": "600"]
        #expect(modes == expected)
        #expect(Self.mode(of: database) == "600")
        // The step-aside lock file every opened database keeps beside it, with the database's mode.
        #expect(directory.listing() == ["new.sqlite", "new.sqlite-lock"])
        #expect(Self.mode(of: database + "-lock") == "600")
    }

    @Test("SQLite gives -journal, -wal and -shm the database's mode, not the umask's", arguments: ["wal", "delete"])
    func sideFilesCopyTheDatabaseMode(journalMode: String) throws {
        let directory = TemporaryDirectory("modes")
        let database = directory.file("shared.sqlite")
        let key = TestKeys.hex()
        _ = try Self.harnessModes(umask: "022", database: database, journalMode: "delete", key: key)
        #expect(chmod(database, 0o640) == 0)
        // umask 077 alone would give 0600 side files; SQLite copies the database's 0640.
        let modes = try Self.harnessModes(umask: "077", database: database, journalMode: journalMode, key: key)
        let expected = journalMode == "wal" ? ["db": "640", "-wal": "640", "-shm": "640"] : ["db": "640", "-journal": "640"]
        #expect(modes == expected)
    }

    @Test("rekey decrypt and rekey dump --out write 0600 files under umask 022 and 077", arguments: ["022", "077"])
    func copiesAreOwnerOnly(umask: String) throws {
        let fixture = try CLIFixture()
        let environment = fixture.ring.environment
        let decrypt = try RekeyCLI.runWrapped("umask \(umask);", ["decrypt", "--db", "app.sqlite", "--out", "plain.sqlite", "--confirm-plaintext"],
                                              in: fixture.directory, environment: environment)
        #expect(decrypt.status == 0, "\(decrypt.stderr)")
        #expect(Self.mode(of: fixture.directory.file("plain.sqlite")) == "600")
        let dump = try RekeyCLI.runWrapped("umask \(umask);", ["dump", "--db", "app.sqlite", "--out", "dump.sql"], in: fixture.directory, environment: environment)
        #expect(dump.status == 0, "\(dump.stderr)")
        #expect(Self.mode(of: fixture.directory.file("dump.sql")) == "600")
    }

    @Test("a rotation under umask 077 keeps a 0644 file 0644 (page re-encryption; export of a plaintext file)", arguments: [false, true])
    func rotationKeepsTheMode(plaintext: Bool) throws {
        let directory = TemporaryDirectory("modes")
        let ring = TestKeyring([.passphrase, .hex], in: directory, plaintextID: plaintext ? "plain" : nil)
        let database = directory.file("app.sqlite")
        if plaintext {
            try SQLiteShell.createFixture(at: database, rows: 50)
        } else {
            try Fixture.createWithShell(at: database, key: ring.keys[0].shellKey, rows: 50)
        }
        _ = FileManager.default.createFile(atPath: directory.file("Keys"), contents: Data(ring.yaml(databasePath: "app.sqlite").utf8), attributes: [.posixPermissions: 0o600])
        #expect(chmod(database, 0o644) == 0)
        let result = try RekeyCLI.runWrapped("umask 077;", ["--db", "app.sqlite"], in: directory, environment: ring.environment)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("\"k2\""), "\(result.stdout)")
        #expect(try SQLCipherShell.opens(database, with: ring.keys[1].shellKey))
        #expect(Self.mode(of: database) == "644")
    }
}
