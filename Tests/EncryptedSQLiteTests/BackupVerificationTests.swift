import DurableFiles
@testable import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// A backup (and a decrypted copy) is read with its key and compared with its snapshot before it is published:
/// a copy damaged between the copy and that check is refused, and nothing appears under the
/// target's name. The copy reaches the file-operations seam (`FileOperations.written`) as the
/// export path's does, where the independent shell spoils it.
@Suite("Backup: verification before publishing", .ownThread)
struct BackupVerificationTests {
    /// A database of 300 fixture rows made by the shell on a hex key, and an empty folder for the copy.
    struct Setup {
        let directory: TemporaryDirectory
        let ring: TestKeyring
        let path: String
        let outFolder: String

        init(_ label: String) throws {
            directory = TemporaryDirectory(label)
            ring = TestKeyring([.hex], in: directory)
            path = directory.file("app.sqlite")
            try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 300)
            outFolder = directory.file("out")
            try FileManager.default.createDirectory(atPath: outFolder, withIntermediateDirectories: false)
        }
    }

    @Test("a copy damaged before its check gives verificationFailed: nothing under the target's name, no temporary left", arguments: CopyDamage.allCases)
    func damagedCopyRefused(_ damage: CopyDamage) throws {
        let setup = try Setup("backup-verify")
        let (ring, path, backups) = (setup.ring, setup.path, setup.outFolder)
        let target = backups + "/app-backup.sqlite"

        let damaged = EventCounter()
        var options = OpenOptions()
        options.files.written = { copy in
            _ = damaged.next()
            if let problem = damage.apply(to: copy, key: ring.keys[0].shellKey) { Issue.record(Comment(rawValue: problem)) }
        }
        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: options)
        let before = FileSnapshot(path)
        #expect {
            try database.backup(to: target)
        } throws: { error in
            guard case .verificationFailed(_, "k1", let detail) = error as? EncryptedDatabaseError else { return false }
            return detail.hasPrefix("the backup copy ") && detail.hasSuffix("nothing was written under \(target)")
        }
        #expect(damaged.count == 1, "the backup should have handed its copy to the seam once")
        #expect(!FileManager.default.fileExists(atPath: target))
        #expect(try FileManager.default.contentsOfDirectory(atPath: backups) == [], "no temporary left")
        // The database itself is untouched and still serves.
        #expect(FileSnapshot(path) == before)
        #expect(try database.read { try $0.queryValue("SELECT count(*) FROM people", as: Int.self) } == 300)
    }

    @Test("the undamaged copy passes the same check and is published (the control for the test above)")
    func undamagedCopyPublished() throws {
        let directory = TemporaryDirectory("backup-verify-ok")
        let ring = TestKeyring([.hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 300)
        let seen = EventCounter()
        var options = OpenOptions()
        options.files.written = { _ in _ = seen.next() }
        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: options)
        let target = directory.file("app-backup.sqlite")
        try database.backup(to: target)
        #expect(seen.count == 1)
        #expect(try SQLCipherShell.run(target, key: ring.keys[0].shellKey, "SELECT count(*) FROM people;").stdout == "300\n")
    }

    @Test("a decrypted copy damaged before its check gives verificationFailed: nothing under the target's name, no temporary left")
    func damagedDecryptedCopyRefused() throws {
        let setup = try Setup("decrypt-verify")
        let (ring, path, out) = (setup.ring, setup.path, setup.outFolder)
        let target = out + "/plain.sqlite"
        let before = FileSnapshot(path)
        let damaged = EventCounter()
        var files = FileOperations.system
        files.written = { copy in
            _ = damaged.next()
            let result = try? SQLiteShell.run(copy, "DELETE FROM people WHERE id = 17;")
            #expect(result?.status == 0, "\(result?.stderr ?? "")")
        }
        #expect {
            try DatabaseInspection.decryptedCopy(path: path, keys: ring.keyList(database: path), to: target, busyTimeout: .seconds(5), files: files)
        } throws: { error in
            guard case .verificationFailed(_, _, let detail) = error as? EncryptedDatabaseError else { return false }
            return detail.hasPrefix("the decrypted copy has different row counts") && detail.hasSuffix("nothing was written under \(target)")
        }
        #expect(damaged.count == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: out) == [], "no copy, no temporary")
        #expect(FileSnapshot(path) == before)
        // The control: undamaged, the copy is published and the plain sqlite3 shell reads it.
        try DatabaseInspection.decryptedCopy(path: path, keys: ring.keyList(database: path), to: target)
        #expect(try SQLiteShell.run(target, "SELECT count(*) FROM people;").stdout == "300\n")
    }
}
