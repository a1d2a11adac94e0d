import DurableFiles
@testable import EncryptedSQLite
import Foundation
import KeyConfiguration
import Testing
import TestSupport

/// Crashes during a master-key rotation (`rekey keys rewrap`) and during a rotation to a wrapped
/// data key: after each, the Keys file loads, every wrapped value unwraps with a KEK it lists,
/// and the database opens with its content intact.
@Suite("Crashes during master-key rotation and rotation to a wrapped data key", .serialized, .ownThread)
struct KeyEncryptionCrashTests {
    /// Trials per path; raise with KEK_CRASH_TRIALS for stress runs.
    static let trials = TestKnobs.count("KEK_CRASH_TRIALS", default: 20)
    static let seed = TestKnobs.seed("POWER_CUT_SEED")
    /// Further database entries in the Keys file, each with its own data key wrapped by `kek-1`
    /// (no database behind them), so that the rewraps below edit a fleet's file; raise with
    /// KEK_CRASH_FLEET (the fleet benchmark's sizes: 10000, 100000).
    static let fleet = TestKnobs.count("KEK_CRASH_FLEET", default: 1000)

    /// A folder with a Keys file whose KEK `kek-1` is a key file, and `app.sqlite` on the wrapped
    /// data key `d1` (or, with `wrappedCurrent`, on the passphrase `p0` with `d1` appended as current).
    struct Setup {
        let folder: TemporaryDirectory
        let expected: String
        let passphrase = TestKeys.passphrase("p0")

        init(_ label: String, onPassphrase: Bool) throws {
            folder = TemporaryDirectory(label)
            let kekBytes = (0..<32).map { _ in UInt8.random(in: 0...255) }
            _ = FileManager.default.createFile(atPath: folder.file("kek-1.key"), contents: Data(kekBytes), attributes: [.posixPermissions: 0o600])
            let kek = LocalKeyEncryptionKey(id: "kek-1", key: try DataKey(copying: kekBytes))
            let dataKey = DataKey.random()
            let value = try KeyEncryptionKeyList([kek]).wrap(dataKey, dataKeyID: "d1")
            let old = onPassphrase ? "      - id: p0\n        passphrase: \"\(passphrase)\"\n" : ""
            var fleet = ""
            fleet.reserveCapacity(KeyEncryptionCrashTests.fleet * 160)
            for index in 0..<KeyEncryptionCrashTests.fleet {
                let other = try KeyEncryptionKeyList([kek]).wrap(DataKey.random(), dataKeyID: "f\(index)")
                fleet += "  - path: fleet/db-\(index).sqlite\n    keys:\n      - id: f\(index)\n        wrapped_by: kek-1\n        wrapped_key: \(other.text)\n"
            }
            let text = """
                # master keys
                key_encryption_keys:
                  - id: kek-1
                    file: kek-1.key
                    format: binary
                databases:
                  - path: app.sqlite
                    keys:
                \(old)      - id: d1
                        wrapped_by: kek-1
                        wrapped_key: "\(value.text)"

                """ + fleet
            _ = FileManager.default.createFile(atPath: folder.file("Keys"), contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
            let path = folder.file("app.sqlite")
            let hex = dataKey.withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() }
            try Fixture.createWithShell(at: path, key: onPassphrase ? .passphrase(passphrase) : .hex(hex), rows: 1500)
            let blobs = "CREATE TABLE blobs(id INTEGER PRIMARY KEY, b BLOB); WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 300) INSERT INTO blobs(b) SELECT randomblob(3000) FROM n;"
            #expect(try SQLCipherShell.run(path, key: onPassphrase ? .passphrase(passphrase) : .hex(hex), blobs).status == 0)
            expected = try Fixture.digest(of: path, with: KeysFile.load(path: folder.file("Keys")).keyList(forDatabase: path))
            for name in folder.listing() { try FileSystem.fsync(path: folder.file(name)) }
            try FileSystem.fsyncDirectory(folder.path)
        }

        /// Loads the Keys file in `folder` and opens its database without rotating: the outcome
        /// (`openedWithNew` when the new KEK or the new data key is in use).
        /// `previousKEK`: the KEK `d1` was wrapped by before the crash, for a rewrap; `nil` for a rotation.
        static func check(_ folder: String, expected: String, previousKEK: String?, trial: String) -> (CrashOutcome, [String]) {
            let path = folder + "/app.sqlite"
            do {
                let keysFile = try KeysFile.load(path: folder + "/Keys")
                let keys = try keysFile.keyList(forDatabase: path)
                let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(rotateToCurrentKey: false))
                let integrity = try database.read { try $0.queryValue("PRAGMA integrity_check", as: String.self) }
                let content = try database.read { try Fixture.contentDigest($0) }
                guard integrity == "ok" else { return (.unopenable, ["\(trial): integrity_check: \(integrity ?? "nil")"]) }
                guard content == expected else { return (.checksumMismatch, ["\(trial): content differs"]) }
                let isNew: Bool
                if let previousKEK {
                    guard case .wrapped(let value) = keysFile.entries[0].keys.last?.source else { return (.unopenable, ["\(trial): d1 is not wrapped"]) }
                    isNew = value.keyEncryptionKeyID != previousKEK
                    // The fleet's values: all under d1's KEK (never a mix of old and new), each unwrapping.
                    for entry in keysFile.entries.dropFirst() {
                        guard case .wrapped(let other) = entry.keys.last?.source, other.keyEncryptionKeyID == value.keyEncryptionKeyID else {
                            return (.unopenable, ["\(trial): \(entry.configuredPath) is not wrapped by \(value.keyEncryptionKeyID)"])
                        }
                        _ = try keysFile.keyEncryptionKeys.unwrap(other, dataKeyID: entry.keys[0].id, database: entry.configuredPath)
                    }
                } else {
                    isNew = database.report.openedWithKeyID == "d1"
                }
                return (isNew ? .openedWithNew : .openedWithOld, [])
            } catch {
                return (.unopenable, ["\(trial): \(error)"])
            }
        }
    }

    @Test("a power cut at any durable step of a rewrap to a new KEK: the old Keys file or the new one, whose KEK file is durable first")
    func powerCutDuringRewrap() throws {
        let setup = try Setup("kek-power-fixture", onPassphrase: false)
        let recorder = PowerCutRecorder(folder: setup.folder.path)
        let rotation = try MasterKeyRotation.rewrap(
            keysFile: setup.folder.file("Keys"), to: nil, newKeyEncryptionKey: .init(id: "kek-2"), environment: nil, created: nil, files: recorder.operations())
        #expect(rotation.rewrapped == 1 + Self.fleet)
        let events = recorder.recorded.count
        // The new KEK file durably in place before the Keys file naming it is replaced: two
        // whole-file writes through the seam (11 steps).
        recorder.expectSteps(
            ExpectedStepRun.wholeFileWrite(of: "key file", replacing: false) + ExpectedStepRun.wholeFileWrite(of: "Keys", replacing: true),
            "master-key rewrap to a new KEK")
        print("power cut: master-key rewrap: steps: \(recorder.stepRuns.map(\.description).joined(separator: ", "))")
        try tally("power cut: master-key rewrap", events: events) { image, trial in
            let folder = TemporaryDirectory("kek-power-image")
            try image.materialize(into: folder.path)
            for name in folder.listing() { chmod(folder.file(name), 0o600) }
            return Setup.check(folder.path, expected: setup.expected, previousKEK: "kek-1", trial: trial)
        } recorder: { recorder }
    }

    @Test("a power cut at any durable step of a rotation from a passphrase to a wrapped data key")
    func powerCutDuringRotationToWrappedKey() throws {
        let setup = try Setup("kek-rotation-fixture", onPassphrase: true)
        let recorder = PowerCutRecorder(folder: setup.folder.path)
        var options = OpenOptions()
        options.files = recorder.operations()
        let path = setup.folder.file("app.sqlite")
        let fileSize = Int(FileSystem.size(of: path) ?? 0)
        let pageSize: Int
        do {
            let database = try EncryptedDatabase(path: path, keys: KeysFile.load(path: setup.folder.file("Keys")).keyList(forDatabase: path), options: options)
            #expect(database.report.openedWithKeyID == "p0" && database.report.isOnCurrentKey)
            pageSize = try database.read { try $0.integerPragma("page_size") } ?? 0
        }
        // A page re-encryption (the same page format: a data key needs no other settings).
        recorder.expectSteps(ExpectedStepRun.pageReencryption(fileSize: fileSize, pageSize: pageSize), "rotation to a wrapped data key")
        print("power cut: rotation to a wrapped data key: steps (page size \(pageSize)): \(recorder.stepRuns.map(\.description).joined(separator: ", "))")
        try tally("power cut: rotation to a wrapped data key", events: recorder.recorded.count) { image, trial in
            let folder = TemporaryDirectory("kek-rotation-image")
            try image.materialize(into: folder.path)
            for name in folder.listing() { chmod(folder.file(name), 0o600) }
            return Setup.check(folder.path, expected: setup.expected, previousKEK: nil, trial: trial)
        } recorder: { recorder }
    }

    @Test("kill -9 at random instants of `rekey keys rewrap --new-kek`: the Keys file always loads and the database opens")
    func killDuringRewrap() throws {
        let setup = try Setup("kek-kill", onPassphrase: false)
        let rekey = RekeyCLI.path
        func trial(_ index: Int) -> KillTrial {
            KillTrial(executable: rekey, arguments: ["keys", "rewrap", "--new-kek", "kek-k\(index)", "--keys", "Keys"], environment: [:], directory: setup.folder.path)
        }
        // One uninterrupted run on a copy sets the window.
        let probe = TemporaryDirectory("kek-kill-probe")
        for name in setup.folder.listing() { try TestFiles.copy(setup.folder.file(name), to: probe.file(name)) }
        let timed = try KillTrial(executable: rekey, arguments: ["keys", "rewrap", "--new-kek", "kek-probe", "--keys", "Keys"], environment: [:], directory: probe.path).uninterrupted()
        #expect(timed.result.status == 0, "\(timed.result.stderr)")
        var random = SeededRandom(seed: Self.seed)
        var tally = CrashTally(path: "kill -9: master-key rewrap")
        var killedMidRun = 0
        var previous = "kek-1"
        for index in 0..<Self.trials {
            if try trial(index).killed(after: KillTrial.instant(in: .zero...timed.duration, random: &random)) { killedMidRun += 1 }
            let (outcome, problems) = Setup.check(setup.folder.path, expected: setup.expected, previousKEK: previous, trial: "trial \(index), seed \(Self.seed)")
            if outcome == .openedWithNew { previous = "kek-k\(index)" }
            for problem in problems { Issue.record("\(problem)") }
            tally.record(outcome)
            // A kill inside a durable write leaves its temporary (one for the KEK file, one for the
            // Keys file, at most); the next run removes it.
            let strays = setup.folder.listing().filter { $0.hasPrefix(".") }
            #expect(strays.count <= 2, "temporaries of earlier runs were not removed: \(strays)")
        }
        let last = try trial(Self.trials).uninterrupted()
        #expect(last.result.status == 0, "\(last.result.stderr)")
        #expect(setup.folder.listing().filter { $0.hasPrefix(".") }.isEmpty, "a complete run leaves no temporary behind")
        print(tally.row)
        print("kill -9 [master-key rewrap]: \(killedMidRun) of \(Self.trials) killed mid-run, run \(timed.duration), seed \(Self.seed)")
        #expect(tally.unopenable == 0 && tally.checksumMismatches == 0)
    }

    @Test("kill -9 at random instants of `rekey --db` rotating from a passphrase to a wrapped data key")
    func killDuringRotationToWrappedKey() throws {
        let setup = try Setup("kek-kill-rotation", onPassphrase: true)
        let rekey = RekeyCLI.path
        let original = try Data(contentsOf: URL(fileURLWithPath: setup.folder.file("app.sqlite")))
        let run = KillTrial(executable: rekey, arguments: ["--db", "app.sqlite", "--keys", "Keys"], environment: [:], directory: setup.folder.path)
        let timed = try run.uninterrupted()
        #expect(timed.result.status == 0, "\(timed.result.stderr)")
        var random = SeededRandom(seed: Self.seed)
        var tally = CrashTally(path: "kill -9: rotation to a wrapped data key")
        for index in 0..<(Self.trials / 2) {
            // Back to the passphrase before each trial.
            FileSystem.removeIfPresent(setup.folder.file("app.sqlite-journal"))
            try original.write(to: URL(fileURLWithPath: setup.folder.file("app.sqlite")))
            try run.killed(after: KillTrial.instant(in: .zero...timed.duration, random: &random))
            let (outcome, problems) = Setup.check(setup.folder.path, expected: setup.expected, previousKEK: nil, trial: "trial \(index), seed \(Self.seed)")
            for problem in problems { Issue.record("\(problem)") }
            tally.record(outcome)
        }
        print(tally.row)
        #expect(tally.unopenable == 0 && tally.checksumMismatches == 0)
    }

    @Test("controls: the checker calls a Keys file whose new KEK file is lost unopenable, and changed rows a mismatch")
    func checkerControls() throws {
        let setup = try Setup("kek-control", onPassphrase: false)
        _ = try MasterKeyRotation.rewrap(keysFile: setup.folder.file("Keys"), newKeyEncryptionKey: .init(id: "kek-2"), created: nil)
        #expect(Setup.check(setup.folder.path, expected: setup.expected, previousKEK: "kek-1", trial: "control").0 == .openedWithNew)
        let lost = TemporaryDirectory("kek-control-lost")
        for name in setup.folder.listing() where name != "kek-2.key" {
            try TestFiles.copy(setup.folder.file(name), to: lost.file(name))
        }
        #expect(Setup.check(lost.path, expected: setup.expected, previousKEK: "kek-1", trial: "control").0 == .unopenable)
        let path = setup.folder.file("app.sqlite")
        let database = try EncryptedDatabase(path: path, keys: KeysFile.load(path: setup.folder.file("Keys")).keyList(forDatabase: path))
        try database.write { try $0.execute("UPDATE people SET score = score + 1 WHERE id = 7") }
        #expect(Setup.check(setup.folder.path, expected: setup.expected, previousKEK: "kek-1", trial: "control").0 == .checksumMismatch)
    }

    /// Runs the power-cut trials over `recorder`'s events and checks the tally.
    private func tally(
        _ name: String, events: Int, check: (PowerCutImage, String) throws -> (CrashOutcome, [String]), recorder: () -> PowerCutRecorder
    ) throws {
        var tally = CrashTally(path: name)
        for trial in 0..<Self.trials {
            let seed = Self.seed &+ UInt64(trial)
            var random = SeededRandom(seed: seed)
            let mode: PowerCutMode = trial % 2 == 0 ? .dropUnsynced : .randomSubset
            let cut = Int.random(in: 0...events, using: &random)
            let image = PowerCutImage(recorder(), cut: cut, mode: mode, random: &random)
            let (outcome, problems) = try check(image, "cut \(cut) of \(events), \(mode.rawValue), seed \(seed)")
            for problem in problems { Issue.record("\(problem)") }
            tally.record(outcome)
        }
        print(tally.row)
        print("\(name): \(events) durable steps recorded, seeds \(Self.seed)...\(Self.seed &+ UInt64(Self.trials - 1))")
        #expect(tally.unopenable == 0 && tally.checksumMismatches == 0 && tally.trials == Self.trials)
    }
}
