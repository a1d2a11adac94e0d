import DurableFiles
import EncryptedSQLite
import Foundation
import Testing
import TestSupport

@Suite("A writer process while another process rotates", .serialized, .ownThread)
struct WriterKillTests {
    /// Trials per journal mode; raise with WRITER_KILL_TRIALS for stress runs.
    static let trials = TestKnobs.count("WRITER_KILL_TRIALS", default: 8)
    static let seed = TestKnobs.seed("REKEY_KILL_SEED")

    @Test("rekey killed at random instants while another process commits rows: every row the writer saw committed survives, and the file opens with one of the keys, intact",
          arguments: ["delete", "wal"])
    func writerDuringRotation(journalMode: String) throws {
        let directory = TemporaryDirectory("writer-kill")
        let (old, new) = (TestKeys.hex(), TestKeys.hex())
        let fixture = directory.file("fixture.sqlite")
        try WriterKillCheck.makeFixture(at: fixture, oldKeyHex: old, journalMode: journalMode)
        let baseline = try WriterKillCheck.bigTable(fixture, KeyList(database: fixture, keys: [DatabaseKey(id: "old", source: .hex(old))]))

        let folder = TemporaryDirectory("writer-kill-trial")
        let path = folder.file("app.sqlite")
        _ = FileManager.default.createFile(atPath: folder.file("Keys"), contents: Data("""
            databases:
              - path: app.sqlite
                keys:
                  - id: old
                    hex: \(old)
                  - id: new
                    hex: \(new)
            """.utf8), attributes: [.posixPermissions: 0o600])
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "old", source: .hex(old)), DatabaseKey(id: "new", source: .hex(new))])
        let checker = WriterKillCheck(keys: keys, oldShellKey: .hex(old), newShellKey: .hex(new), baseline: baseline)
        let writer = KillTrial(executable: BuiltProduct.crashHarness, arguments: ["write", path],
                               environment: ["HARNESS_OLD_KEY_HEX": old, "HARNESS_NEW_KEY_HEX": new], directory: folder.path)
        let rotator = KillTrial(executable: RekeyCLI.path, arguments: ["--db", "app.sqlite", "--json"], environment: [:], directory: folder.path)

        // Calibrate: one uninterrupted rotation while the writer runs.
        try reset(path, from: fixture)
        var window: ClosedRange<Duration> = .zero ... .seconds(1)
        let calibration = try withWriter(writer) { _ in
            let (result, wall) = try rotator.uninterrupted()
            #expect(result.status == 0, "\(result.stderr)")
            window = .zero...wall
        }
        #expect(calibration.count > 0)

        var random = SeededRandom(seed: Self.seed)
        var tally = CrashTally(path: "kill -9: rekey while another process writes (\(journalMode))")
        var rowsCommitted = 0
        for number in 1...Self.trials {
            try reset(path, from: fixture)
            let committed = try withWriter(writer) { output in
                try rotator.killed(after: KillTrial.instant(in: window, random: &random))
                // The writer goes on after the rotation (finished or killed): 3 more rows committed.
                let target = output.count(prefix: "committed ") + 3
                #expect(output.wait(forCount: target, of: "committed "),
                        "trial \(number): the writer did not go on after the rotation: \(output.text.suffix(300))")
            }
            rowsCommitted += committed.count
            // WRITER_KILL_KEEP=<folder> keeps each trial's files, committed rows and keys for inspection.
            if let keep = ProcessInfo.processInfo.environment["WRITER_KILL_KEEP"] {
                let target = "\(keep)/trial-\(journalMode)-\(number)"
                try? FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
                for name in folder.listing() { try? TestFiles.copy(folder.file(name), to: target + "/" + name) }
                try? committed.sorted().map(String.init).joined(separator: "\n").write(toFile: target + "/committed.txt", atomically: true, encoding: .utf8)
                try? "\(old)\n\(new)\n".write(toFile: target + "/keys.txt", atomically: true, encoding: .utf8)
            }
            let verdict = try checker.check(path, committed: committed, trial: "trial \(number)")
            for problem in verdict.problems { Issue.record("\(problem)") }
            tally.record(verdict.outcome)
        }
        print(tally.row)
        print("\(tally); \(rowsCommitted) rows reported committed by the writer in all, uninterrupted rotation \(Int(window.upperBound.seconds * 1000)) ms, seed \(Self.seed)")
        #expect(tally.unopenable == 0)
        #expect(tally.checksumMismatches == 0)
    }

    /// Runs `body` while a writer process commits rows; kills the writer afterwards and returns the
    /// row numbers it reported committed.
    private func withWriter(_ writer: KillTrial, _ body: (OutputLines) throws -> Void) throws -> Set<Int> {
        let pipe = Pipe()
        let process = writer.start(output: pipe.fileHandleForWriting)
        try process.run()
        let child = ChildSignal(process)
        try pipe.fileHandleForWriting.close()
        let output = OutputLines(pipe.fileHandleForReading)
        // It has the file open and has committed a few rows before the rotation starts.
        let writing = output.wait(forCount: 5, of: "committed ")
        let failure = Result {
            try #require(writing, "the writer did not commit 5 rows: \(output.text.suffix(300))")
            try body(output)
        }
        // Killed exactly once, and only while it is ours (a reaped PID can be reused).
        child.send(SIGKILL)
        process.waitUntilExit()
        output.waitForEnd()  // a join: every line it printed has been read
        try failure.get()
        return Set(output.lines.compactMap { line in line.text.hasPrefix("committed ") ? Int(line.text.dropFirst(10)) : nil })
    }

    private func reset(_ path: String, from fixture: String) throws {
        for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        let folder = (path as NSString).deletingLastPathComponent
        for name in (try FileManager.default.contentsOfDirectory(atPath: folder)) where name.hasPrefix(".app.sqlite.") {
            try FileManager.default.removeItem(atPath: folder + "/" + name)
        }
        try TestFiles.copy(fixture, to: path)
    }
}
