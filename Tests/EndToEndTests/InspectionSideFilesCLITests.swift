import EncryptedSQLite
import Foundation
import Testing
import TestSupport

@Suite("rekey --check and status leave the folder as they found it", .ownThread)
struct InspectionSideFilesCLITests {
    /// `app.sqlite` made by the `sqlcipher` shell alone in its folder; the Keys file (an
    /// absolute path entry) is in another folder.
    struct Setup {
        let directory = TemporaryDirectory("cli-inspect")
        let keysFolder = TemporaryDirectory("cli-inspect-keys")
        let ring: TestKeyring
        let path: String
        let wal: Bool

        init(wal: Bool) throws {
            self.wal = wal
            ring = TestKeyring([.hex, .passphrase], in: keysFolder)
            path = directory.file("app.sqlite")
            try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 30, walMode: wal)
            _ = FileManager.default.createFile(atPath: keysFolder.file("Keys"), contents: Data(ring.yaml(databasePath: path).utf8), attributes: [.posixPermissions: 0o600])
        }

        func rekey(_ arguments: [String]) throws -> ProcessResult {
            try RekeyCLI.run(arguments + ["--db", path, "--keys", keysFolder.file("Keys")], in: keysFolder, environment: ring.environment)
        }
    }

    @Test("alone: no -wal or -shm left behind, and status reports none", arguments: [true, false])
    func alone(wal: Bool) throws {
        let setup = try Setup(wal: wal)
        let before = FolderSnapshot(setup.directory.path)
        #expect(before.names == ["app.sqlite"])
        let check = try setup.rekey(["--check"])
        #expect(check.status == 3, "\(check.stderr)")
        #expect(FolderSnapshot(setup.directory.path).changes(since: before) == [], "after --check")
        for _ in 0..<2 {
            let status = try setup.rekey(["status"])
            #expect(status.status == 0, "\(status.stderr)")
            #expect(status.stdout.contains("journal \(wal ? "wal" : "delete")") && !status.stdout.contains("side files"), "\(status.stdout)")
            #expect(FolderSnapshot(setup.directory.path).changes(since: before) == [], "after status")
        }
    }

    @Test("with another process holding the file open, its side files stay (-wal and -journal byte for byte) and status reports them", arguments: [true, false])
    func held(wal: Bool) throws {
        let setup = try Setup(wal: wal)
        let shell = try #require(SQLCipherShell.path, "the sqlcipher shell is not installed; run scripts/setup.sh")
        let sql = wal ? "INSERT INTO audit(note) VALUES ('held');" : "BEGIN IMMEDIATE;\nINSERT INTO audit(note) VALUES ('held');"
        let holder = try ShellHolder(shell: shell, database: setup.path, key: setup.ring.keys[0].shellKey, sql: sql)
        defer { holder.release() }
        // The shared-memory index's bytes change as readers take read marks; its name must stay.
        let ignored: Set<String> = wal ? ["app.sqlite-shm"] : []
        let before = FolderSnapshot(setup.directory.path, ignoringBytesOf: ignored)
        let sideFiles = wal ? ["-wal", "-shm"] : ["-journal"]
        #expect(before.names == (["app.sqlite"] + sideFiles.map { "app.sqlite" + $0 }).sorted())
        let check = try setup.rekey(["--check"])
        #expect(check.status == 3, "\(check.stderr)")
        #expect(FolderSnapshot(setup.directory.path, ignoringBytesOf: ignored).changes(since: before) == [], "after --check")
        let status = try setup.rekey(["status"])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.contains("side files \(sideFiles.joined(separator: " "))"), "\(status.stdout)")
        #expect(FolderSnapshot(setup.directory.path, ignoringBytesOf: ignored).changes(since: before) == [], "after status")
    }
}
