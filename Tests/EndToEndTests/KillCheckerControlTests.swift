import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// Controls for the kill -9 trials' checker (`KillSetup.check`, the code the trials run): it must
/// tell a changed database and an unopenable one from a good one, or the trials prove nothing.
@Suite("kill -9 checker: controls", .ownThread)
struct KillCheckerControlTests {
    /// A trial folder holding a fresh copy of a small fixture of `path`.
    private func trialFolder(_ path: KillPath) throws -> (setup: KillSetup, folder: TemporaryDirectory, file: String) {
        let setup = try KillSetup(path, rows: 300)
        let folder = TemporaryDirectory("kill-control")
        try setup.writeKeysFile(into: folder)
        let file = folder.file("app.sqlite")
        try setup.reset(file)
        return (setup, folder, file)
    }

    @Test("the untouched fixture passes the checker (so the two controls below fail for the reason they mean)", arguments: KillPath.all)
    func untouchedPasses(_ path: KillPath) throws {
        let (setup, folder, file) = try trialFolder(path)
        let verdict = try setup.check(file, in: folder, trial: "control")
        #expect(verdict.outcome == .openedWithOld, "\(verdict)")
        #expect(verdict.problems.isEmpty, "\(verdict)")
    }

    @Test("a database changed with the right key, still passing integrity_check, is reported as a checksum mismatch", arguments: KillPath.all)
    func changedIsMismatch(_ path: KillPath) throws {
        let (setup, folder, file) = try trialFolder(path)
        let update = "UPDATE big SET tag = 'changed' WHERE id = 150;"
        let changed = path.kind == .plaintextExport
            ? try SQLiteShell.run(file, update + " PRAGMA integrity_check;")
            : try SQLCipherShell.run(file, key: setup.ring.keys[0].shellKey, version3: path.oldIsVersion3, update + " PRAGMA integrity_check;")
        #expect(changed.status == 0 && changed.stdout == "ok\n", "\(changed.stderr)")
        let verdict = try setup.check(file, in: folder, trial: "control")
        #expect(verdict.outcome == .checksumMismatch, "\(verdict)")
        #expect(verdict.problems.contains("control: the content changed"), "\(verdict)")
    }

    @Test("a database whose page 1 is random bytes is reported as unopenable", arguments: KillPath.all)
    func overwrittenIsUnopenable(_ path: KillPath) throws {
        let (setup, folder, file) = try trialFolder(path)
        try CrashControl.overwriteStart(of: file)
        let verdict = try setup.check(file, in: folder, trial: "control")
        #expect(verdict.outcome == .unopenable, "\(verdict)")
        #expect(verdict.problems.contains { $0.hasPrefix("control: the sqlcipher shell opens the file with neither key") }, "\(verdict)")
        #expect(verdict.problems.contains { $0.hasPrefix("control: the library does not open the file") }, "\(verdict)")
    }
}
