import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// Controls for the writer-kill trials' checker (`WriterKillCheck.check`, the code the trials
/// run): it must tell a changed database and an unopenable one from a good one.
@Suite("writer-kill checker: controls", .ownThread)
struct WriterKillCheckerControlTests {
    /// What a control does to the trial's file before the check.
    enum Damage: String, CaseIterable, Sendable {
        case none, rowChanged, committedRowLost, pageOneOverwritten
    }

    /// A trial folder with a small fixture in `journalMode`, in which "the writer" (here the
    /// sqlcipher shell) committed ledger rows 1, 2 and 3; then `damage`; then the trials' check.
    private func verdict(_ damage: Damage, journalMode: String) throws -> CrashVerdict {
        let (old, new) = (TestKeys.hex(), TestKeys.hex())
        let folder = TemporaryDirectory("writer-control")
        let path = folder.file("app.sqlite")
        try WriterKillCheck.makeFixture(at: path, oldKeyHex: old, journalMode: journalMode, rows: 500)
        let baseline = try WriterKillCheck.bigTable(path, KeyList(database: path, keys: [DatabaseKey(id: "old", source: .hex(old))]))
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "old", source: .hex(old)), DatabaseKey(id: "new", source: .hex(new))])
        let checker = WriterKillCheck(keys: keys, oldShellKey: .hex(old), newShellKey: .hex(new), baseline: baseline)

        func shell(_ sql: String) throws {
            let result = try SQLCipherShell.run(path, key: .hex(old), sql)
            #expect(result.status == 0, "\(result.stderr)")
        }
        try shell("INSERT INTO ledger(n, payload) VALUES (1, randomblob(100)), (2, randomblob(100)), (3, randomblob(100));")
        var committed: Set<Int> = [1, 2, 3]
        switch damage {
        case .none: break
        // One value in the middle of the table nothing writes, the same length, with the right key.
        case .rowChanged: try shell("UPDATE big SET payload = zeroblob(1000) WHERE id = 250;")
        case .committedRowLost: committed.insert(4)
        case .pageOneOverwritten: try CrashControl.overwriteStart(of: path)
        }
        if damage != .pageOneOverwritten {
            let integrity = try SQLCipherShell.run(path, key: .hex(old), "PRAGMA integrity_check;")
            #expect(integrity.stdout == "ok\n", "\(integrity.stderr)")
        }
        return try checker.check(path, committed: committed, trial: "control")
    }

    @Test("the untouched file passes the checker (so the controls below fail for the reason they mean)", arguments: ["delete", "wal"])
    func untouchedPasses(journalMode: String) throws {
        let verdict = try verdict(.none, journalMode: journalMode)
        #expect(verdict.outcome == .openedWithOld, "\(verdict)")
        #expect(verdict.problems.isEmpty, "\(verdict)")
    }

    @Test("a row of the untouched table changed with the right key, or a committed row missing, still passing integrity_check, is a checksum mismatch",
          arguments: [Damage.rowChanged, .committedRowLost], ["delete", "wal"])
    func changedIsMismatch(_ damage: Damage, journalMode: String) throws {
        let verdict = try verdict(damage, journalMode: journalMode)
        #expect(verdict.outcome == .checksumMismatch, "\(verdict)")
        let expected = damage == .rowChanged ? "0 committed rows lost ([]), or the untouched table changed (true)" : "1 committed rows lost ([4]), or the untouched table changed (false)"
        #expect(verdict.problems == ["control: " + expected], "\(verdict)")
    }

    @Test("a file whose page 1 is random bytes is unopenable", arguments: ["delete", "wal"])
    func overwrittenIsUnopenable(journalMode: String) throws {
        let verdict = try verdict(.pageOneOverwritten, journalMode: journalMode)
        #expect(verdict.outcome == .unopenable, "\(verdict)")
        #expect(verdict.problems.contains("control: the sqlcipher shell opens the file with neither key"), "\(verdict)")
        #expect(verdict.problems.contains { $0.hasPrefix("control: the library does not open the file") }, "\(verdict)")
    }
}
