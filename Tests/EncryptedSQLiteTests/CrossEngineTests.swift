import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// 3.x-format files cross between SQLCipher 3.4.1 and SQLCipher 4 (``EngineExchange``): every run
/// writes them, and `scripts/test.sh` hands them to the other engine's run, which opens them with
/// its own `sqlcipher` shell and the library, and rotates them.
@Suite("Cross-engine files (SQLCipher 3.4.1 ⇄ SQLCipher 4, 3.x format)", .ownThread)
struct CrossEngineTests {
    static let rows = 50

    @Test("writes 3.x-format files for the other engine (library: passphrase, raw key in WAL mode, rotated in place; the sqlcipher shell) and checks them here first")
    func writeFilesForTheOtherEngine() throws {
        let folder = EngineExchange.outFolder
        try? FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let passphrase = ShellKey.passphrase(TestKeys.passphrase("exchange"))
        let raw = ShellKey.hex(TestKeys.hex())
        let old = ShellKey.passphrase(TestKeys.passphrase("exchange-old"))
        func keys(_ path: String, _ shellKeys: ShellKey...) throws -> KeyList {
            try KeyList(database: path, keys: shellKeys.enumerated().map { EngineExchange.version3Key(id: "x\($0.offset)", $0.element) })
        }

        var entries: [EngineExchange.Entry] = []
        let library = folder + "/library-passphrase.sqlite"
        try Fixture.createWithLibrary(at: library, keys: keys(library, passphrase), rows: Self.rows)
        entries.append(.init(name: "library-passphrase.sqlite", madeBy: "the library", key: passphrase, rows: Self.rows))

        let wal = folder + "/library-hex-wal.sqlite"
        try Fixture.createWithLibrary(at: wal, keys: keys(wal, raw), rows: Self.rows, walMode: true)
        entries.append(.init(name: "library-hex-wal.sqlite", madeBy: "the library, WAL mode", key: raw, rows: Self.rows))

        let rotated = folder + "/library-rotated.sqlite"
        try Fixture.createWithLibrary(at: rotated, keys: keys(rotated, old), rows: Self.rows)
        #expect(try EncryptedDatabase(path: rotated, keys: keys(rotated, old, raw)).report.rotated)
        entries.append(.init(name: "library-rotated.sqlite", madeBy: "the library, rotated in place", key: raw, rows: Self.rows))

        let shell = folder + "/shell.sqlite"
        try Fixture.createWithShell(at: shell, key: passphrase, rows: Self.rows, version3: true)
        entries.append(.init(name: "shell.sqlite", madeBy: "the sqlcipher shell \(SQLCipherShell.majorVersion).x in 3.x mode", key: passphrase, rows: Self.rows))

        let reference = try Self.referenceDigest(in: TemporaryDirectory("exchange-reference"))
        for entry in entries {
            let path = folder + "/" + entry.name
            // The shell in 3.x mode (compatibility 3 on a SQLCipher 4 shell) opens it: it is a 3.x file.
            #expect(try SQLCipherShell.opens(path, with: entry.shellKey, version3: true), "\(entry.name)")
            #expect(try Fixture.digest(of: path, with: KeyList(database: path, keys: [entry.databaseKey(id: "x")])) == reference, "\(entry.name)")
            #expect(!FileManager.default.fileExists(atPath: path + "-wal"), "\(entry.name) left a -wal file")
        }
        try EngineExchange.write(.init(engine: SQLCipherEngine.linked.version, files: entries), to: folder)
    }

    @Test("opens the files the other engine's run wrote: its sqlcipher shell and the library read them intact, and the library rotates them",
          .enabled(if: EngineExchange.inFolder != nil, "runs in scripts/test.sh, which sets ENCRYPTEDSQLITE_EXCHANGE_IN to the folder the other engine's run wrote"))
    func openFilesTheOtherEngineWrote() throws {
        let folder = try #require(EngineExchange.inFolder)
        let manifest = try EngineExchange.manifest(in: folder)
        #expect(manifest.engineMajor != SQLCipherEngine.linked.major,
                "\(folder) was written by SQLCipher \(manifest.engine), the engine linked here")
        #expect(manifest.files.count == 4)
        let directory = TemporaryDirectory("exchange-in")
        let reference = try Self.referenceDigest(in: directory)
        for entry in manifest.files {
            let path = directory.file(entry.name)
            try TestFiles.copy(folder + "/" + entry.name, to: path)
            let context = "\(entry.name) (\(entry.madeBy), SQLCipher \(manifest.engine))"

            let shell = try SQLCipherShell.run(path, key: entry.shellKey, version3: true,
                                               "PRAGMA integrity_check;\nSELECT count(*) FROM people;\nPRAGMA user_version;\nPRAGMA application_id;")
            #expect(shell.status == 0, "\(context): \(shell.stderr)")
            #expect(shell.stdout.split(separator: "\n") == ["ok", "\(entry.rows)", "42", "1234567"], "\(context)")
            #expect(try Fixture.digest(of: path, with: KeyList(database: path, keys: [entry.databaseKey(id: "x")])) == reference, "\(context)")

            let next = ShellKey.hex(TestKeys.hex())
            let keys = try KeyList(database: path, keys: [entry.databaseKey(id: "old"), EngineExchange.version3Key(id: "next", next)])
            let database = try EncryptedDatabase(path: path, keys: keys)
            #expect(database.report.rotated, "\(context)")
            #expect(try database.read { try Fixture.contentDigest($0) } == reference, "\(context)")
            #expect(try SQLCipherShell.opens(path, with: next, version3: true), "\(context)")
            #expect(try !SQLCipherShell.opens(path, with: entry.shellKey, version3: true), "\(context)")
        }
    }

    /// The digest of the fixture in a plaintext file made by the `sqlite3` shell: what every
    /// exchanged file holds (digests compare only within one process).
    static func referenceDigest(in directory: TemporaryDirectory) throws -> String {
        let plain = directory.file("reference.sqlite")
        try SQLiteShell.createFixture(at: plain, rows: rows)
        return try Fixture.contentDigest(Connection(path: plain, access: .readOnly, key: nil, busyTimeout: .seconds(1)))
    }
}
