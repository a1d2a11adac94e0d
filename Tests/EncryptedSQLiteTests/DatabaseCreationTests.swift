import DurableFiles
@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Testing
import TestSupport

/// The durable steps one creation took through the seam, in order, from any thread.
final class StepLog: Sendable {
    private let steps = Locked<[String]>([])
    func note(_ step: String) { steps.withLock { $0.append(step) } }
    var all: [String] { steps.withLock { $0 } }
}

/// A target path in a fresh folder and a list of two raw keys (no KDF cost); the second is current.
struct CreationSetup {
    let directory = TemporaryDirectory("create")
    let ring: TestKeyring
    let path: String
    let keys: KeyList

    init() throws {
        ring = TestKeyring([.hex, .hex], in: directory)
        path = directory.file("app.sqlite")
        keys = try ring.keyList(database: path)
    }

    /// The creation of `path` with the current key, through `files`.
    func creation(_ files: FileOperations = .system) -> DatabaseCreation {
        DatabaseCreation(path: path, key: keys.current, busyTimeout: .seconds(2), logger: OpenOptions().logger, files: files)
    }

    /// The real seam, noting each durable step in `log`.
    func logging(into log: StepLog) -> FileOperations {
        var files = FileOperations.system
        files.fsync = { path throws(FileSystemError) in
            log.note("fsync \(path)")
            try FileOperations.system.fsync(path)
        }
        files.linkWithoutReplacing = { source, target throws(FileSystemError) in
            log.note("link \(source) \(target)")
            try FileOperations.system.linkWithoutReplacing(source, target)
        }
        files.fsyncDirectory = { path throws(FileSystemError) in
            log.note("folder \(path)")
            try FileOperations.system.fsyncDirectory(path)
        }
        return files
    }

    /// A database made by the `sqlcipher` shell with the *older* key, alone in a folder of its own
    /// under the same name: what another process might create at the target meanwhile, and (with
    /// its folder) the snapshot the target must still match afterwards.
    func otherDatabase(in folder: TemporaryDirectory) throws -> String {
        let other = folder.file("app.sqlite")
        try Fixture.createWithShell(at: other, key: ring.keys[0].shellKey, rows: 20)
        try #require(folder.listing() == ["app.sqlite"])
        return other
    }
}

@Suite("Database creation (temporary, flock, publish)", .ownThread)
struct DatabaseCreationTests {
    @Test("the new file opens with the current key only, mode 0600, empty, and no temporary is left; the temporary is named, locked and complete before it is linked")
    func creates() throws {
        let setup = try CreationSetup()
        let path = setup.path
        let log = StepLog()
        let logged = setup.logging(into: log)
        var files = logged
        files.fsync = { temporary throws(FileSystemError) in
            // Before the link: the target does not exist, the temporary is held, so that an open
            // running now does not take it for a dead process's leftover.
            #expect(!FileManager.default.fileExists(atPath: path))
            #expect(!LockedNewFile.isAbandoned(temporary))
            #expect(RotationTemporaries.removeStale(of: path).isEmpty)
            #expect(FileManager.default.fileExists(atPath: temporary))
            try logged.fsync(temporary)
        }
        files.linkWithoutReplacing = { source, target throws(FileSystemError) in
            // What is linked is the whole database: page 1 written, no journal beside it.
            #expect((FileSystem.size(of: source) ?? 0) >= 1024)
            #expect(!FileManager.default.fileExists(atPath: source + "-journal"))
            try logged.linkWithoutReplacing(source, target)
        }

        #expect(try setup.creation(files).run())

        let steps = log.all
        try #require(steps.count == 3, "\(steps)")
        let temporary = String(try #require(steps[0].split(separator: " ").last))
        #expect(FileSystem.folder(of: temporary) == FileSystem.folder(of: path))
        #expect(RotationTemporaries.isTemporaryName(URL(fileURLWithPath: temporary).lastPathComponent, of: "app.sqlite"))
        #expect(temporary.hasSuffix(".rekey-create"))
        #expect(steps == ["fsync \(temporary)", "link \(temporary) \(path)", "folder \(FileSystem.folder(of: path))"])

        #expect(setup.directory.listing() == ["app.sqlite"])
        #expect(FileSystem.permissions(of: path) == 0o600)
        #expect(try SQLCipherShell.opens(path, with: setup.ring.keys[1].shellKey))
        #expect(try !SQLCipherShell.opens(path, with: setup.ring.keys[0].shellKey))
        #expect(try SQLCipherShell.run(path, key: setup.ring.keys[1].shellKey, "SELECT count(*) FROM sqlite_master;\nPRAGMA user_version;").stdout == "0\n0\n")
        if case .opaque = DatabaseFileKind.inspect(path: path) {} else { Issue.record("the new file is not encrypted") }

        let opened = try EncryptedDatabase(path: path, keys: setup.keys)
        #expect(opened.report.openedWithKeyID == "k2")
        #expect(!opened.report.created)
        #expect(!opened.report.rotated)
    }

    @Test("a file that is at the target before the link wins: run() returns false, it stays byte-identical, no temporary",
          arguments: ["before run()", "during the temporary's fsync", "during the link"])
    func targetAppears(when: String) throws {
        let setup = try CreationSetup()
        let path = setup.path
        let reference = TemporaryDirectory("create-other")
        let other = try setup.otherDatabase(in: reference)
        let contents = try #require(TestFiles.contents(other))
        @Sendable func appear() {
            guard !FileManager.default.fileExists(atPath: path) else { return }
            #expect(FileManager.default.createFile(atPath: path, contents: contents))
        }
        let log = StepLog()
        let logged = setup.logging(into: log)
        var files = logged
        switch when {
        case "before run()":
            appear()
        case "during the temporary's fsync":
            files.fsync = { temporary throws(FileSystemError) in
                appear()
                try logged.fsync(temporary)
            }
        default:
            files.linkWithoutReplacing = { source, target throws(FileSystemError) in
                appear()
                try logged.linkWithoutReplacing(source, target)
            }
        }

        #expect(try !setup.creation(files).run())

        #expect(FileSnapshot(path) == FileSnapshot(other), "the file that appeared was changed, or something was left beside it")
        #expect(setup.directory.listing() == ["app.sqlite"])
        #expect(log.all.count == 2, "\(log.all)")  // fsync, link; the folder is not synced
        #expect(try SQLCipherShell.opens(path, with: setup.ring.keys[0].shellKey))
    }

    @Test("a failure before the link (temporary's fsync, link) leaves no file at the target and no temporary",
          arguments: ["fsync", "link"])
    func failureBeforeLink(step: String) throws {
        let setup = try CreationSetup()
        let injected = FileSystemError.failed(operation: "injected \(step)", errno: EIO)
        var files = FileOperations.system
        if step == "fsync" {
            files.fsync = { _ throws(FileSystemError) in throw injected }
        } else {
            files.linkWithoutReplacing = { _, _ throws(FileSystemError) in throw injected }
        }
        #expect(throws: EncryptedDatabaseError.ioFailure(path: setup.path, operation: "creating the database", detail: injected.description)) {
            try setup.creation(files).run()
        }
        #expect(setup.directory.listing().isEmpty)
    }

    @Test("a failed folder fsync comes after the link: the error is thrown, the complete file is in place (documented on run()), no temporary")
    func folderSyncFailure() throws {
        let setup = try CreationSetup()
        let injected = FileSystemError.failed(operation: "injected folder fsync", errno: EIO)
        var files = FileOperations.system
        files.fsyncDirectory = { _ throws(FileSystemError) in throw injected }
        #expect(throws: EncryptedDatabaseError.ioFailure(path: setup.path, operation: "creating the database", detail: injected.description)) {
            try setup.creation(files).run()
        }
        #expect(setup.directory.listing() == ["app.sqlite"])
        #expect(try SQLCipherShell.opens(setup.path, with: setup.ring.keys[1].shellKey))
        // The next open finds it like any existing file.
        let opened = try EncryptedDatabase(path: setup.path, keys: setup.keys, options: OpenOptions(createIfMissing: true))
        #expect(!opened.report.created)
        #expect(opened.report.openedWithKeyID == "k2")
    }

    @Test("a missing folder, or a file where the folder should be, gives fileNotFound and creates nothing",
          arguments: ["missing", "a regular file"])
    func missingFolder(folder: String) throws {
        let setup = try CreationSetup()
        if folder == "a regular file" {
            #expect(FileManager.default.createFile(atPath: setup.directory.file("sub"), contents: Data("x".utf8)))
        }
        let before = setup.directory.listing()
        let path = setup.directory.file("sub/app.sqlite")
        let log = StepLog()
        let creation = DatabaseCreation(path: path, key: setup.keys.current, busyTimeout: .seconds(2), logger: OpenOptions().logger,
                                        files: setup.logging(into: log))
        #expect(throws: EncryptedDatabaseError.fileNotFound(path: path)) {
            try creation.run()
        }
        #expect(setup.directory.listing() == before)
        #expect(log.all.isEmpty)
    }
}
