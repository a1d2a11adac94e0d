import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// The one rule for relative paths, checked from a working directory other than the Keys file's
/// folder (the `rekey` process gets its own; the test process never changes its own).
@Suite("Keys file paths from another working directory", .ownThread)
struct KeysFilePathCLITests {
    let directory = TemporaryDirectory("keys-paths")
    let ring: TestKeyring
    /// `data/notes.sqlite` beside the Keys file, on the old key.
    var database: String { directory.file("data/notes.sqlite") }
    /// The working directory `rekey` runs in: a sibling of `data/`.
    var elsewhere: String { directory.file("elsewhere") }

    init() throws {
        ring = TestKeyring([.passphrase, .hex], in: directory)
        for folder in ["data", "elsewhere"] {
            try FileManager.default.createDirectory(atPath: directory.file(folder), withIntermediateDirectories: true)
        }
        try Fixture.createWithShell(at: directory.file("data/notes.sqlite"), key: ring.keys[0].shellKey, rows: 10)
        _ = FileManager.default.createFile(atPath: directory.file("Keys"), contents: Data(ring.yaml(databasePath: "data/notes.sqlite").utf8), attributes: [.posixPermissions: 0o600])
    }

    func rekey(_ arguments: [String]) throws -> ProcessResult {
        try ProcessRunner.run(RekeyCLI.path, ["--keys", directory.file("Keys")] + arguments, environment: ProcessRunner.withPATH(ring.environment), currentDirectory: elsewhere)
    }

    @Test("a relative --db is taken from the working directory: the Keys file's spelling of it is not listed there, and the message shows both resolved paths; nothing is written")
    func entrySpellingFromElsewhere() throws {
        let before = FileSnapshot(database)
        let result = try rekey(["--db", "data/notes.sqlite"])
        #expect(result.status == 78, "\(result.stderr)")
        // The argument as resolved against the working directory, and the entry as resolved against the Keys file's folder.
        #expect(result.stderr.contains("data/notes.sqlite (from the working directory: \(elsewhere)/data/notes.sqlite)"), "\(result.stderr)")
        #expect(result.stderr.contains("its entries, taken from its folder: \(database)"), "\(result.stderr)")
        #expect(result.stderr.contains("a relative database path is taken from the working directory"), "\(result.stderr)")
        #expect(FileSnapshot(database) == before)
    }

    @Test("from another working directory, the path as seen from there, or an absolute one, names the listed database")
    func pathFromWorkingDirectory() throws {
        let relative = try rekey(["--db", "../data/notes.sqlite", "--check"])
        #expect(relative.status == 3, "\(relative.stderr)")   // on an old key: needs rotation
        let absolute = try rekey(["--db", database])
        #expect(absolute.status == 0, "\(absolute.stderr)")
        #expect(try EncryptedDatabase.check(path: database, keys: try ring.only(1, database: database)).openedWithKeyID == "k2")
    }
}
