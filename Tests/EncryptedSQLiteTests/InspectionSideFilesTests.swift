import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// A database made by the `sqlcipher` shell in WAL or rollback-journal mode, alone in its folder.
struct InspectedFolder {
    let directory = TemporaryDirectory("inspect")
    let ring: TestKeyring
    let path: String
    let wal: Bool

    init(wal: Bool) throws {
        self.wal = wal
        ring = TestKeyring([.hex, .passphrase], in: TemporaryDirectory("inspect-keys"))
        path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 30, walMode: wal)
    }

    /// Another process with the file open: a `sqlcipher` shell that committed a write (WAL mode:
    /// its `-wal` and `-shm` stay while it is open) or holds a write transaction open (rollback
    /// mode: its `-journal` exists until it ends).
    func holder() throws -> ShellHolder {
        let shell = try #require(SQLCipherShell.path, "the sqlcipher shell is not installed; run scripts/setup.sh")
        let sql = wal ? "INSERT INTO audit(note) VALUES ('held');" : "BEGIN IMMEDIATE;\nINSERT INTO audit(note) VALUES ('held');"
        return try ShellHolder(shell: shell, database: path, key: ring.keys[0].shellKey, sql: sql)
    }

    /// The side files another connection's being open leaves next to the file.
    var heldSideFiles: [String] { wal ? ["-wal", "-shm"] : ["-journal"] }
}

@Suite("Read-only inspection leaves the folder as it found it", .ownThread)
struct InspectionSideFilesTests {
    @Test("check, state, dump and a decrypted copy leave no -wal or -shm behind", arguments: [true, false])
    func alone(wal: Bool) throws {
        let folder = try InspectedFolder(wal: wal)
        let keys = try folder.ring.keyList(database: folder.path)
        let before = FolderSnapshot(folder.directory.path)
        #expect(before.names == ["app.sqlite"])

        #expect(try EncryptedDatabase.check(path: folder.path, keys: keys).openedWithKeyID == "k1")
        #expect(FolderSnapshot(folder.directory.path).changes(since: before) == [], "after check")
        let state = try DatabaseInspection.state(path: folder.path, keys: keys)
        #expect(state.journalMode == (wal ? "wal" : "delete") && state.sideFiles.isEmpty)
        #expect(FolderSnapshot(folder.directory.path).changes(since: before) == [], "after state")
        var lines = 0
        try DatabaseInspection.dump(path: folder.path, keys: keys) { _ in lines += 1 }
        #expect(lines > 30)
        #expect(FolderSnapshot(folder.directory.path).changes(since: before) == [], "after dump")
        let elsewhere = TemporaryDirectory("inspect-copy")
        try DatabaseInspection.decryptedCopy(path: folder.path, keys: keys, to: elsewhere.file("plain.sqlite"))
        #expect(FolderSnapshot(folder.directory.path).changes(since: before) == [], "after decryptedCopy")
        #expect(elsewhere.listing() == ["plain.sqlite"])
    }

    @Test("with another process holding the file open, its side files stay (-wal and -journal byte for byte)", arguments: [true, false])
    func heldByAnotherProcess(wal: Bool) throws {
        let folder = try InspectedFolder(wal: wal)
        let keys = try folder.ring.keyList(database: folder.path)
        let holder = try folder.holder()
        defer { holder.release() }
        // The shared-memory index's bytes change as readers take read marks; its name must stay.
        let ignored: Set<String> = wal ? ["app.sqlite-shm"] : []
        let before = FolderSnapshot(folder.directory.path, ignoringBytesOf: ignored)
        #expect(before.names == (["app.sqlite"] + folder.heldSideFiles.map { "app.sqlite" + $0 }).sorted())

        #expect(try EncryptedDatabase.check(path: folder.path, keys: keys).openedWithKeyID == "k1")
        #expect(FolderSnapshot(folder.directory.path, ignoringBytesOf: ignored).changes(since: before) == [], "after check")
        let state = try DatabaseInspection.state(path: folder.path, keys: keys)
        #expect(state.sideFiles == folder.heldSideFiles)
        #expect(FolderSnapshot(folder.directory.path, ignoringBytesOf: ignored).changes(since: before) == [], "after state")
        try DatabaseInspection.dump(path: folder.path, keys: keys) { _ in }
        #expect(FolderSnapshot(folder.directory.path, ignoringBytesOf: ignored).changes(since: before) == [], "after dump")
    }
}
