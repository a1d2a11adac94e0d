import DurableFiles
@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Testing
import TestSupport

/// A path of the library that orders its own writes, syncs and renames, set up for power-cut trials.
struct PowerCutPath: CustomTestStringConvertible, Sendable {
    enum Kind: String, Sendable {
        case pageReencryption, pageReencryptionWAL, plaintextExport, settingsExport, creation
        /// ``OpenOptions/backgroundRotation``: the copy beside the file and the swap.
        case backgroundCopy, backgroundCopyWAL
        /// A 3.x-format file whose current key has no settings, on SQLCipher 4: the export to 4.x.
        case upgradeExport
    }

    let kind: Kind

    var testDescription: String {
        switch kind {
        case .pageReencryption: "page re-encryption, rollback-journal file"
        case .pageReencryptionWAL: "page re-encryption, WAL file"
        case .plaintextExport: "export + swap: plaintext to encrypted"
        case .settingsExport: "export + swap: new cipher settings"
        case .creation: "creation of a new database"
        case .upgradeExport: "export + swap: 3.x file to 4.x (current key without settings)"
        case .backgroundCopy: "background copy + swap, rollback-journal file"
        case .backgroundCopyWAL: "background copy + swap, WAL file"
        }
    }

    /// How the recorded run must rotate (`nil`: it creates the file).
    var expectedMethod: RotationMethod? {
        switch kind {
        case .pageReencryption, .pageReencryptionWAL: .pageReencryption
        case .plaintextExport, .settingsExport, .upgradeExport: .export
        case .creation: nil
        case .backgroundCopy, .backgroundCopyWAL: .backgroundCopy
        }
    }

    /// Whether the recorded run rotates in the background.
    var background: Bool { kind == .backgroundCopy || kind == .backgroundCopyWAL }

    /// Whether the shell reads and writes the old key's file in the 3.x format.
    var oldIsVersion3: Bool { kind == .upgradeExport }

    /// The durable steps the path must take through the seam, for a database file of `fileSize`
    /// bytes (before the run) in pages of `pageSize`; `backgroundSteps`: the copy steps a
    /// background rotation reported.
    ///
    /// - Page re-encryption (either journal mode: a WAL file is checkpointed and rewritten the
    ///   same way): ``ExpectedStepRun/pageReencryption(fileSize:pageSize:chunkBytes:)``.
    /// - Export + swap, and creation: SQLite writes the temporary without the seam; the library
    ///   flushes it by path, renames (export) or links it (creation: never over a file) into
    ///   place, and flushes the folder.
    /// - Background copy: the copy's flushes while it copies (one per 8 MiB, and before the last
    ///   steps: at most one per copy step, timing decides) and the swap's own flush are one run of
    ///   1…steps+1; each side file the database still has at the swap (`sideFilesAtSwap`: a WAL
    ///   file's checkpointed, empty `-wal` where the engine leaves it, SQLCipher 3.4.1 here but not
    ///   4.6.1) is flushed; the folder; then the publish: the copy's flush, the rename over the
    ///   database, the folder.
    func expectedSteps(fileSize: Int, pageSize: Int, backgroundSteps: Int, sideFilesAtSwap: [String] = []) -> [ExpectedStepRun] {
        switch kind {
        case .pageReencryption, .pageReencryptionWAL:
            return ExpectedStepRun.pageReencryption(fileSize: fileSize, pageSize: pageSize)
        case .plaintextExport, .settingsExport, .upgradeExport:
            return [ExpectedStepRun(.sync, "temporary"), ExpectedStepRun(.rename, "temporary→database"), ExpectedStepRun(.syncFolder)]
        case .creation:
            return [ExpectedStepRun(.sync, "temporary"), ExpectedStepRun(.link, "temporary→database"), ExpectedStepRun(.unlink, "temporary"), ExpectedStepRun(.syncFolder)]
        case .backgroundCopy, .backgroundCopyWAL:
            return [ExpectedStepRun(.sync, "temporary", counts: 1...(backgroundSteps + 1))]
                + ["-wal", "-journal"].filter { sideFilesAtSwap.contains("app.sqlite" + $0) }.map { ExpectedStepRun(.sync, PowerCutStep.role(of: "app.sqlite" + $0)) }
                + [ExpectedStepRun(.syncFolder), ExpectedStepRun(.sync, "temporary"), ExpectedStepRun(.rename, "temporary→database"), ExpectedStepRun(.syncFolder)]
        }
    }

    /// Every path; the 3.x → 4.x export only where the linked engine writes 4.x by default.
    static let all: [PowerCutPath] = ([.pageReencryption, .pageReencryptionWAL, .plaintextExport, .settingsExport, .creation, .backgroundCopy, .backgroundCopyWAL]
        + (SQLCipherEngine.linked.major >= 4 ? [.upgradeExport] : [])).map(PowerCutPath.init)
}

@Suite("Power cut at every durable step (simulated through the file-operations seam)", .serialized, .ownThread)
struct PowerCutTests {
    /// Trials per path; raise with POWER_CUT_TRIALS for stress runs.
    static let trials = TestKnobs.count("POWER_CUT_TRIALS", default: 40)
    /// The seed of the first trial; set POWER_CUT_SEED to replay a run.
    static let seed = TestKnobs.seed("POWER_CUT_SEED")

    @Test("a power cut before any durable step of the path leaves the old file or the complete new one, never a damaged or missing database",
          arguments: PowerCutPath.all)
    func powerCut(_ path: PowerCutPath) throws {
        let setup = try Setup(path.kind)
        // One real run, recorded.
        let work = TemporaryDirectory("power-run")
        try setup.place(in: work)
        let recorder = PowerCutRecorder(folder: work.path)
        var options = OpenOptions(createIfMissing: path.kind == .creation)
        options.files = recorder.operations()
        options.backgroundRotation = path.background
        var pageSize = 0, backgroundSteps = 0
        do {
            let database = try EncryptedDatabase(path: work.file("app.sqlite"), keys: setup.keys(at: work.file("app.sqlite")), options: options)
            if let rotation = database.backgroundRotation {
                // A poll of the state the library exposes, then checked (not an order from the sleep).
                while !rotation.state.isFinal { usleep(2000) }
                #expect(database.report.rotation?.fallbackReason == nil)
                if case .finished(let report) = rotation.state { backgroundSteps = report.background?.steps ?? 0 }
            }
            pageSize = try database.read { try $0.integerPragma("page_size") } ?? 0
            if backgroundSteps == 0 { backgroundSteps = database.report.rotation?.background?.steps ?? 0 }
            #expect(database.report.isOnCurrentKey)
            #expect(database.report.rotation?.method == path.expectedMethod, "the recorded run must take the path under test")
        }
        let events = recorder.recorded.count
        // The database's side files in the folder when the swap flushes it (background copies).
        let sideFilesAtSwap = recorder.recorded.first { if case .syncFolder = $0.event { true } else { false } }
            .map { $0.listing.keys.filter { $0.hasPrefix("app.sqlite-") } } ?? []
        recorder.expectSteps(path.expectedSteps(
            fileSize: Int(FileSystem.size(of: setup.fixture.file("app.sqlite")) ?? 0), pageSize: pageSize, backgroundSteps: backgroundSteps,
            sideFilesAtSwap: path.background ? sideFilesAtSwap : []), path.testDescription)
        print("power cut [\(path.testDescription)]: steps (page size \(pageSize)): \(recorder.stepRuns.map(\.description).joined(separator: ", "))")

        var tally = CrashTally(path: "power cut: \(path.testDescription)")
        for trial in 0..<Self.trials {
            let seed = Self.seed &+ UInt64(trial)
            var random = SeededRandom(seed: seed)
            // Every other trial keeps a random subset of the unsynced writes; the cut falls
            // before a random event (or after the last).
            let mode: PowerCutMode = trial % 2 == 0 ? .dropUnsynced : .randomSubset
            let cut = Int.random(in: 0...events, using: &random)
            let image = PowerCutImage(recorder, cut: cut, mode: mode, random: &random)
            let verdict = try setup.check(image, trial: "cut \(cut) of \(events), \(mode.rawValue), seed \(seed)")
            for problem in verdict.problems { Issue.record("\(problem)") }
            tally.record(verdict.outcome)
        }
        print(tally.row)
        print("power cut [\(path.testDescription)]: \(events) durable steps recorded, seeds \(Self.seed)...\(Self.seed &+ UInt64(Self.trials - 1))")
        #expect(tally.unopenable == 0)
        #expect(tally.checksumMismatches == 0)
        #expect(tally.trials == Self.trials)
    }

    /// The files, keys and checks of one path.
    struct Setup {
        let kind: PowerCutPath.Kind
        let fixture: TemporaryDirectory
        let ring: TestKeyring
        let expected: String
        let newSettings: CipherSettings

        init(_ kind: PowerCutPath.Kind) throws {
            self.kind = kind
            fixture = TemporaryDirectory("power-fixture")
            let plaintext = kind == .plaintextExport
            ring = TestKeyring([.passphrase, .hex], in: fixture, plaintextID: plaintext ? "v0" : nil)
            newSettings = kind == .settingsExport ? CipherSettings(kdfIterations: 10_000, pageSize: 4096) : .engineDefault
            let path = fixture.file("app.sqlite")
            // About 1 MB, so that a page re-encryption writes several chunks.
            let blobs = "CREATE TABLE blobs(id INTEGER PRIMARY KEY, b BLOB); WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 300) INSERT INTO blobs(b) SELECT randomblob(3000) FROM n;"
            switch kind {
            case .plaintextExport:
                try SQLiteShell.createFixture(at: path, rows: 1500)
                #expect(try SQLiteShell.run(path, blobs).status == 0)
                expected = try Fixture.digest(of: path, with: KeyList(database: path, keys: [.plaintext(id: "v0"), DatabaseKey(id: "x", source: .hex(TestKeys.hex()))]))
            case .creation:
                expected = ""
            default:
                let version3 = PowerCutPath(kind: kind).oldIsVersion3
                try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 1500, walMode: kind == .pageReencryptionWAL || kind == .backgroundCopyWAL, version3: version3)
                #expect(try SQLCipherShell.run(path, key: ring.keys[0].shellKey, version3: version3, blobs + " PRAGMA wal_checkpoint(TRUNCATE);").status == 0)
                expected = try Fixture.digest(of: path, with: ring.only(0, database: path))
            }
        }

        /// The key list: old (or plaintext) → new.
        func keys(at path: String) throws -> KeyList {
            var list: [DatabaseKey] = kind == .plaintextExport ? [.plaintext(id: "v0")] : []
            if kind != .plaintextExport && kind != .creation { list.append(ring.keys[0].key) }
            if kind == .creation { list.append(ring.keys[0].key) }
            let new = ring.keys[1].key
            list.append(DatabaseKey(id: new.id, source: new.source, cipher: newSettings))
            return try KeyList(database: path, keys: list, environment: ring.environment)
        }

        /// Copies the fixture into `folder` and makes it durable there.
        func place(in folder: TemporaryDirectory) throws {
            if kind != .creation {
                try TestFiles.copy(fixture.file("app.sqlite"), to: folder.file("app.sqlite"))
                try FileSystem.fsync(path: folder.file("app.sqlite"))
            }
            try FileSystem.fsyncDirectory(folder.path)
        }

        /// Rebuilds `image` in a fresh folder and checks it the way a user would after the power
        /// comes back: the independent shell, then the library. The trials and
        /// `PowerCutCheckerControlTests` both call it.
        func check(_ image: PowerCutImage, trial: String) throws -> CrashVerdict {
            var problems: [String] = []
            let folder = TemporaryDirectory("power-image")
            try image.materialize(into: folder.path)
            let path = folder.file("app.sqlite")

            if kind == .creation {
                // Either no database yet, or a complete one; never a 0-byte or broken file.
                guard FileManager.default.fileExists(atPath: path) else {
                    _ = try EncryptedDatabase(path: path, keys: keys(at: path), options: OpenOptions(createIfMissing: true))
                    let stray = folder.listing().filter { $0.contains(".rekey-") }
                    if !stray.isEmpty { problems.append("\(trial): temporaries left after the next open: \(stray)") }
                    return CrashVerdict(.openedWithOld, problems: problems)
                }
                do {
                    let database = try EncryptedDatabase(path: path, keys: keys(at: path))
                    let ok = try database.read { try $0.queryValue("PRAGMA integrity_check", as: String.self) } == "ok"
                    if !ok { problems.append("\(trial): integrity_check failed") }
                    return CrashVerdict(ok ? .openedWithNew : .unopenable, problems: problems)
                } catch {
                    problems.append("\(trial): the library does not open the file: \(error)")
                    return CrashVerdict(.unopenable, problems: problems)
                }
            }

            // The independent shell first, on a copy (it rolls back a hot journal itself).
            let copy = TemporaryDirectory("power-shell")
            for name in folder.listing() {
                try TestFiles.copy(folder.file(name), to: copy.file(name))
            }
            let shellNew = try SQLCipherShell.run(copy.file("app.sqlite"), key: nil, ring.keys[1].shellKey.pragma + settingsPragmas + "PRAGMA integrity_check;")
            let shellOld: ProcessResult = kind == .plaintextExport
                ? try SQLiteShell.run(copy.file("app.sqlite"), "PRAGMA integrity_check;")
                : try SQLCipherShell.run(copy.file("app.sqlite"), key: ring.keys[0].shellKey, version3: PowerCutPath(kind: kind).oldIsVersion3, "PRAGMA integrity_check;")
            let shellOK = [shellNew, shellOld].contains { $0.status == 0 && $0.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "ok" }
            if !shellOK { problems.append("\(trial): the shell opens the file with neither key: \(shellNew.stderr) / \(shellOld.stderr)") }

            // Then the library, as an application would open it.
            do {
                let outcome: CrashOutcome
                do {
                    let database = try EncryptedDatabase(path: path, keys: keys(at: path), options: OpenOptions(rotateToCurrentKey: false))
                    let integrity = try database.read { try $0.queryValue("PRAGMA integrity_check", as: String.self) }
                    let content = try database.read { try Fixture.contentDigest($0) }
                    if integrity != "ok" {
                        problems.append("\(trial): integrity_check: \(integrity ?? "nil")")
                        outcome = .unopenable
                    } else if content != expected {
                        problems.append("\(trial): content differs")
                        outcome = .checksumMismatch
                    } else {
                        outcome = database.report.openedWithKeyID == ring.keys[1].id ? .openedWithNew : .openedWithOld
                    }
                }
                let stray = folder.listing().filter { $0.contains(".rekey-") || $0.hasSuffix("-journal") }
                if !stray.isEmpty { problems.append("\(trial): left beside the database after the next open: \(stray)") }
                return CrashVerdict(shellOK ? outcome : .unopenable, problems: problems)
            } catch {
                problems.append("\(trial): the library does not open the file: \(error)")
                return CrashVerdict(.unopenable, problems: problems)
            }
        }

        private var settingsPragmas: String {
            var lines = ""
            if let kdf = newSettings.kdfIterations { lines += "PRAGMA kdf_iter = \(kdf);\n" }
            if let size = newSettings.pageSize { lines += "PRAGMA cipher_page_size = \(size);\n" }
            return "\n" + lines
        }
    }
}
