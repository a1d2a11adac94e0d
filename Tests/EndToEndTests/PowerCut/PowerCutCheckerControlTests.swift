@testable import EncryptedSQLite
import Foundation
import Testing
import TestSupport

extension PowerCutImage {
    /// An image of exactly these files, for the checker's control tests.
    init(files: [String: [UInt8]]) {
        self.files = files
    }
}

/// Controls for the power-cut trials' checker (`PowerCutTests.Setup.check`, the code the trials
/// run): it must tell a changed database and an unopenable one from a good one.
@Suite("power-cut checker: controls", .ownThread)
struct PowerCutCheckerControlTests {
    /// The bytes of the path's fixture after `change` ran on a copy of it.
    private func fixtureBytes(_ setup: PowerCutTests.Setup, _ change: (String) throws -> Void = { _ in }) throws -> [UInt8] {
        let scratch = TemporaryDirectory("power-control")
        let file = scratch.file("app.sqlite")
        try TestFiles.copy(setup.fixture.file("app.sqlite"), to: file)
        try change(file)
        #expect(scratch.listing() == ["app.sqlite"])
        return [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
    }

    @Test("the untouched fixture (or, for creation, no file yet) passes the checker", arguments: PowerCutPath.all)
    func untouchedPasses(_ path: PowerCutPath) throws {
        let setup = try PowerCutTests.Setup(path.kind)
        let files = path.kind == .creation ? [:] : ["app.sqlite": try fixtureBytes(setup)]
        let verdict = try setup.check(PowerCutImage(files: files), trial: "control")
        #expect(verdict.outcome == .openedWithOld, "\(verdict)")
        #expect(verdict.problems.isEmpty, "\(verdict)")
    }

    @Test("a database changed with the right key, still passing integrity_check, is a checksum mismatch",
          arguments: PowerCutPath.all.filter { $0.kind != .creation })
    func changedIsMismatch(_ path: PowerCutPath) throws {
        let setup = try PowerCutTests.Setup(path.kind)
        let bytes = try fixtureBytes(setup) { file in
            let sql = "UPDATE people SET score = score + 1 WHERE id = 700; PRAGMA integrity_check;"
            let result = path.kind == .plaintextExport ? try SQLiteShell.run(file, sql) : try SQLCipherShell.run(file, key: setup.ring.keys[0].shellKey, version3: path.oldIsVersion3, sql)
            #expect(result.status == 0 && result.stdout == "ok\n", "\(result.stderr)")
        }
        let verdict = try setup.check(PowerCutImage(files: ["app.sqlite": bytes]), trial: "control")
        #expect(verdict.outcome == .checksumMismatch, "\(verdict)")
        #expect(verdict.problems == ["control: content differs"], "\(verdict)")
    }

    @Test("a database whose page 1 is random bytes is unopenable", arguments: PowerCutPath.all)
    func overwrittenIsUnopenable(_ path: PowerCutPath) throws {
        let setup = try PowerCutTests.Setup(path.kind)
        let bytes: [UInt8]
        if path.kind == .creation {
            // A database the creation finished (on the new key), then damaged.
            let scratch = TemporaryDirectory("power-control")
            let file = scratch.file("app.sqlite")
            try Fixture.createWithShell(at: file, key: setup.ring.keys[1].shellKey, rows: 50)
            try CrashControl.overwriteStart(of: file)
            bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
        } else {
            bytes = try fixtureBytes(setup) { try CrashControl.overwriteStart(of: $0) }
        }
        let verdict = try setup.check(PowerCutImage(files: ["app.sqlite": bytes]), trial: "control")
        #expect(verdict.outcome == .unopenable, "\(verdict)")
        #expect(verdict.problems.contains { $0.hasPrefix("control: the library does not open the file") }, "\(verdict)")
        if path.kind != .creation {
            #expect(verdict.problems.contains { $0.hasPrefix("control: the shell opens the file with neither key") }, "\(verdict)")
        }
    }
}
