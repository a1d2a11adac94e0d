import DurableFiles
import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// A service that rotates its own file in the background (``OpenOptions/backgroundRotation``)
/// while it commits rows, killed with SIGKILL at random instants of the copy and the swap.
@Suite("kill -9 of a service rotating in the background", .serialized)
struct BackgroundRotationKillTests {
    /// Trials per journal mode; raise with BACKGROUND_KILL_TRIALS for stress runs.
    static let trials = TestKnobs.count("BACKGROUND_KILL_TRIALS", default: 10)
    static let seed = TestKnobs.seed("REKEY_KILL_SEED")

    @Test("every row the service saw committed survives, the file opens with one of the keys, intact, and the next open removes the copy",
          arguments: ["delete", "wal"])
    func killedWhileRotating(journalMode: String) throws {
        let directory = TemporaryDirectory("background-kill")
        let (old, new) = (TestKeys.hex(), TestKeys.hex())
        let fixture = directory.file("fixture.sqlite")
        try WriterKillCheck.makeFixture(at: fixture, oldKeyHex: old, journalMode: journalMode)
        let baseline = try WriterKillCheck.bigTable(fixture, KeyList(database: fixture, keys: [DatabaseKey(id: "old", source: .hex(old))]))

        let folder = TemporaryDirectory("background-kill-trial")
        let path = folder.file("app.sqlite")
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "old", source: .hex(old)), DatabaseKey(id: "new", source: .hex(new))])
        let checker = WriterKillCheck(keys: keys, oldShellKey: .hex(old), newShellKey: .hex(new), baseline: baseline)
        let service = KillTrial(executable: BuiltProduct.crashHarness, arguments: ["write", path],
                                environment: ["HARNESS_OLD_KEY_HEX": old, "HARNESS_NEW_KEY_HEX": new, "HARNESS_BACKGROUND": "1"], directory: folder.path)

        // Calibrate: how long the service takes to end its rotation when nothing interrupts it.
        try reset(path, from: fixture, in: folder)
        let calibration = try run(service, killAfter: .seconds(30), stopAtRotated: true)
        #expect(calibration.rotated == "backgroundCopy", "the service must rotate by the background copy, not \(calibration.rotated ?? "nothing")")
        let window: ClosedRange<Duration> = .zero...max(calibration.elapsed, .milliseconds(50))

        var random = SeededRandom(seed: Self.seed)
        var tally = CrashTally(path: "kill -9: service rotating in the background while it writes (\(journalMode))")
        var rotatedBeforeKill = 0
        for number in 1...Self.trials {
            try reset(path, from: fixture, in: folder)
            let trial = try run(service, killAfter: KillTrial.instant(in: window, random: &random), stopAtRotated: false)
            if trial.rotated != nil { rotatedBeforeKill += 1 }
            let verdict = try checker.check(path, committed: trial.committed, trial: "trial \(number)")
            for problem in verdict.problems { Issue.record("\(problem)") }
            // The next open (the checker's) removed the dead process's copy.
            let stray = folder.listing().filter { $0.contains(".rekey-") }
            if !stray.isEmpty { Issue.record("trial \(number): temporaries left after the next open: \(stray)") }
            tally.record(verdict.outcome)
        }
        print(tally.row)
        print("\(tally); rotation ended before the kill in \(rotatedBeforeKill) trials; uninterrupted rotation \(Int(window.upperBound.seconds * 1000)) ms, seed \(Self.seed)")
        #expect(tally.unopenable == 0)
        #expect(tally.checksumMismatches == 0)
        #expect(tally.trials == Self.trials)
    }

    @Test("another process writes the file meanwhile: the ordinary rotation runs instead, says why, and that process loses no row",
          arguments: ["delete", "wal"])
    func anotherWriter(journalMode: String) async throws {
        let folder = TemporaryDirectory("background-other-writer")
        let (old, new) = (TestKeys.hex(), TestKeys.hex())
        let path = folder.file("app.sqlite")
        try WriterKillCheck.makeFixture(at: path, oldKeyHex: old, journalMode: journalMode, rows: 12000)
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "old", source: .hex(old)), DatabaseKey(id: "new", source: .hex(new))])
        let baseline = try WriterKillCheck.bigTable(path, KeyList(database: path, keys: [DatabaseKey(id: "old", source: .hex(old))]))
        let writer = KillTrial(executable: BuiltProduct.crashHarness, arguments: ["write", path],
                               environment: ["HARNESS_OLD_KEY_HEX": old, "HARNESS_NEW_KEY_HEX": new], directory: folder.path)
        let pipe = Pipe()
        let process = writer.start(output: pipe.fileHandleForWriting)
        try process.run()
        let child = ChildSignal(process)
        try pipe.fileHandleForWriting.close()
        let output = OutputLines(pipe.fileHandleForReading)
        // The writer has the file open and has committed rows before the rotation opens it.
        let writing = await output.arrived(count: 25, of: "committed ")
        #expect(writing, "the writer did not commit 25 rows: \(output.text.suffix(500))")

        var options = OpenOptions()
        options.backgroundRotation = true
        let report: RotationReport
        do {
            let database = try EncryptedDatabase(path: path, keys: keys, options: options)
            report = try await #require(database.backgroundRotation).result()
        }
        // The writer follows the rotation and goes on: 25 more rows committed after it ended.
        let afterRotation = output.count(prefix: "committed ") + 25
        let wentOn = await output.arrived(count: afterRotation, of: "committed ")
        #expect(wentOn, "the writer did not go on after the rotation: \(output.text.suffix(500))")
        child.send(SIGKILL)
        process.waitUntilExit()
        output.waitForEnd()  // a join: every line it printed has been read
        #expect(report.method != .backgroundCopy)
        #expect(report.fallbackReason?.contains("another process") == true, "fallback reason: \(report.fallbackReason ?? "none")")
        let lines = output.lines.map(\.text)
        let committed = Set(lines.compactMap { $0.hasPrefix("committed ") ? Int($0.dropFirst(10)) : nil })
        #expect(committed.count > 50, "the writer should have gone on writing")
        let checker = WriterKillCheck(keys: keys, oldShellKey: .hex(old), newShellKey: .hex(new), baseline: baseline)
        let verdict = try checker.check(path, committed: committed, trial: "other writer")
        #expect(verdict.problems.isEmpty, "\(verdict.problems)")
        #expect(verdict.outcome == .openedWithNew)
    }

    /// Runs the service, kills it after `delay` (or, with `stopAtRotated`, as soon as it reports
    /// the rotation's end), and returns the rows it reported committed.
    private func run(_ service: KillTrial, killAfter delay: Duration, stopAtRotated: Bool) throws -> (committed: Set<Int>, rotated: String?, elapsed: Duration) {
        let pipe = Pipe()
        let process = service.start(output: pipe.fileHandleForWriting)
        let start = ContinuousClock.now
        try process.run()
        let child = ChildSignal(process)
        try pipe.fileHandleForWriting.close()
        let output = OutputLines(pipe.fileHandleForReading)
        if stopAtRotated {
            // Calibration: killed as soon as it says the rotation ended (`delay` is a hang guard).
            output.wait(limit: delay) { lines in lines.contains { $0.text.hasPrefix("rotated ") } }
        } else {
            // Not an order: the kill instant is meant to be random (drawn by the caller); every
            // row the service saw committed must survive wherever it lands.
            sleep(for: delay)
        }
        child.send(SIGKILL)
        process.waitUntilExit()
        output.waitForEnd()  // a join: every line it printed has been read
        let all = output.lines
        let committed = Set(all.compactMap { $0.text.hasPrefix("committed ") ? Int($0.text.dropFirst(10)) : nil })
        let rotatedLine = all.first { $0.text.hasPrefix("rotated ") }
        return (committed, rotatedLine.map { String($0.text.dropFirst(8)) }, rotatedLine.map { $0.at - start } ?? (ContinuousClock.now - start))
    }

    private func reset(_ path: String, from fixture: String, in folder: TemporaryDirectory) throws {
        for name in folder.listing() { try FileManager.default.removeItem(atPath: folder.file(name)) }
        try TestFiles.copy(fixture, to: path)
    }
}
