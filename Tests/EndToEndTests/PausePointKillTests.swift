import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// A service rotating its file at start-up, killed with SIGKILL at each of its file operations in
/// turn. The crash harness stops itself for good at its `n`-th file operation on the database,
/// its journal or its WAL (reads not counted) through the pausing test VFS
/// (`VFSWatch.stopFromEnvironment`), says so, and is killed there; `n` goes 0, 1, 2, … until a
/// run ends without reaching it. After each kill: `rekey --check` gives a diagnosis (current, or
/// needs rotation), the restarted service opens the file on the current key, and the `sqlcipher`
/// shell opens it with that key only, every row intact.
///
/// `KillTests` kills `rekey` at random instants; this kills at every point, in order, with the
/// point replayable by its number.
@Suite("A service killed at each file operation of its rotation at start-up", .serialized, .ownThread)
struct PausePointKillTests {
    /// Rows of 1000 bytes in `big`; PAUSE_POINT_ROWS (comma-separated) for stress runs at other sizes.
    static let bigRowCounts = PausePointSizes.rows(default: 30)

    struct Case: CustomTestStringConvertible, Sendable {
        let journalMode: String
        let engineRekey: Bool
        var testDescription: String { "\(journalMode), \(engineRekey ? "engine rekey" : "automatic")" }
    }

    @Test("every kill point leaves a file the next start opens on the current key with every row, and the shell on that key only",
          arguments: [Case(journalMode: "delete", engineRekey: false), Case(journalMode: "wal", engineRekey: false),
                      Case(journalMode: "delete", engineRekey: true), Case(journalMode: "wal", engineRekey: true)])
    func everyKillPoint(_ scenario: Case) throws {
        for bigRows in Self.bigRowCounts { try everyKillPoint(scenario, bigRows: bigRows) }
    }

    private func everyKillPoint(_ scenario: Case, bigRows: Int) throws {
        var points = 0, problems: [String] = [], diagnoses: [Int32: Int] = [:]
        for point in 0..<2000 {
            let folder = try LiveRotationFolder(journalMode: scenario.journalMode, bigRows: bigRows, listed: 1)
            var environment = ["PAUSING_VFS_FOLDER": folder.folder.path, "PAUSING_VFS_STOP_AT": "\(point)", "SERVICE_NAME": "killed"]
            if scenario.engineRekey { environment["HARNESS_ROTATION_STRATEGY"] = "engineRekey" }
            let harness = Harness(folder: folder, environment: environment)
            try harness.start()
            // Stopped at the point (killed there), or done without reaching it: the last point.
            let paused = harness.output.wait(limit: .seconds(120)) { lines in lines.contains { $0.text.hasPrefix("paused ") } }
            guard paused else {
                let status = harness.finish()
                if status != 0 { problems.append("point \(point): the unpaused run exited \(status): \(harness.stderr.suffix(300))") }
                break
            }
            let event = harness.output.lines.first { $0.text.hasPrefix("paused ") }?.text ?? ""
            harness.kill()
            _ = harness.finish()
            points += 1

            // The diagnosis: current (0) or needs rotation (3), never an error.
            let check = try ProcessRunner.run(RekeyCLI.path, ["--db", "app.sqlite", "--keys", "Keys", "--check"], currentDirectory: folder.folder.path)
            diagnoses[check.status, default: 0] += 1
            if ![0, 3].contains(check.status) { problems.append("\(event): rekey --check exited \(check.status): \(check.stderr.prefix(300))") }
            // The service starts again: on the current key, having written its row.
            let restart = Harness(folder: folder, environment: ["SERVICE_NAME": "restarted"])
            try restart.start()
            let status = restart.finish()
            if status != 0 { problems.append("\(event): the restart exited \(status): \(restart.stderr.suffix(300))") }
            // The independent tool: the current key opens it, intact, and the old one does not.
            let keys = try folder.keyList()
            let shell = try SQLCipherShell.run(folder.path, key: .hex(folder.keyHex(keys.currentID)), "PRAGMA integrity_check; SELECT count(*) FROM big; SELECT count(*) FROM ledger WHERE service = 'restarted';")
            if shell.stdout.split(separator: "\n").map(String.init) != ["ok", "\(bigRows)", "1"] {
                problems.append("\(event): the shell with the current key printed \(shell.stdout.debugDescription) \(shell.stderr.prefix(200))")
            }
            if try SQLCipherShell.opens(folder.path, with: .hex(folder.keyHex("key-0"))) { problems.append("\(event): the old key still opens the file") }
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: folder.folder.path).filter { $0.contains(".rekey-") }
            if !leftovers.isEmpty { problems.append("\(event): temporaries left after the restart: \(leftovers)") }
        }
        print("kill-points|\(scenario.testDescription), \(bigRows) rows|points \(points)|rekey --check \(diagnoses.sorted { $0.key < $1.key }.map { "exit \($0.key): \($0.value)" }.joined(separator: ", "))|problems \(problems.count)")
        for problem in problems.prefix(4) + problems.filter({ $0.contains("rekey --check") }).prefix(2) { print("problem: \(problem)") }
        #expect(points > 10, "only \(points) kill points: the VFS did not stop the harness")
        #expect(problems.isEmpty, "\(problems.count) problems; first: \(problems.first ?? "")")
    }

    /// `crash-harness start Keys app.sqlite <mode>` in the folder, its output read as it comes.
    final class Harness: @unchecked Sendable {
        let process = Process()
        private let outputPipe = Pipe(), errorPipe = Pipe()
        private(set) var output: OutputLines!
        private var errors: OutputLines!
        private var child: ChildSignal?

        init(folder: LiveRotationFolder, environment: [String: String]) {
            process.executableURL = URL(fileURLWithPath: BuiltProduct.crashHarness)
            process.arguments = ["start", "Keys", "app.sqlite", folder.journalMode]
            process.environment = ProcessRunner.withPATH(environment)
            process.currentDirectoryURL = URL(fileURLWithPath: folder.folder.path)
            process.standardOutput = outputPipe
            process.standardError = errorPipe
        }

        func start() throws {
            try process.run()
            child = ChildSignal(process)
            try outputPipe.fileHandleForWriting.close()
            try errorPipe.fileHandleForWriting.close()
            output = OutputLines(outputPipe.fileHandleForReading)
            errors = OutputLines(errorPipe.fileHandleForReading)
        }

        /// Waits for the end; the exit status (128 + signal when killed). A process still running
        /// after 120 s is stopped (``HangGuard``, its backtrace on its standard error) and the
        /// test fails.
        @discardableResult
        func finish() -> Int32 {
            let hangGuard = HangGuard(process, limit: .seconds(120))
            process.waitUntilExit()
            let hung = hangGuard.disarm()
            output.waitForEnd()
            errors.waitForEnd()
            if hung { Issue.record("crash-harness start did not end within 120 s and was stopped with SIGQUIT: \(errors.text.suffix(8000))") }
            return process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
        }

        var stderr: String { errors.text }

        /// SIGKILL, to this process only (``ChildSignal``).
        func kill() {
            child?.send(SIGKILL)
        }
    }
}
