import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// Key rotation while other processes use the database (issue 13): processes starting up at the
/// same instant as a rotation never get a wrong diagnosis, and running services keep serving
/// through rotations made by `rekey` or by one of them.
@Suite("Rotation while other processes use the database", .serialized)
struct LiveRotationTests {
    /// Rounds of concurrent start-up per case; raise with LIVE_STARTUP_ROUNDS for stress runs.
    static let startupRounds = Int(ProcessInfo.processInfo.environment["LIVE_STARTUP_ROUNDS"] ?? "") ?? 8

    /// What one round of processes started at the same instant did.
    struct StartupRound {
        var failures: [String] = []
        var wrongDiagnoses: [String] = []
    }

    @Test("3 services and rekey started at the same instant after a key was appended: every process succeeds, the file ends on the new key",
          arguments: ["wal", "delete"])
    func startupWithRekey(journalMode: String) throws {
        try startupRounds(journalMode: journalMode, services: 3, withRekey: true)
    }

    @Test("4 services started at the same instant after a key was appended (the app's own start-up rotates): every process succeeds",
          arguments: ["wal", "delete"])
    func startupOfServices(journalMode: String) throws {
        try startupRounds(journalMode: journalMode, services: 4, withRekey: false)
    }

    private func startupRounds(journalMode: String, services: Int, withRekey: Bool) throws {
        var failedProcesses = 0, wrongRounds = 0
        for round in 1...Self.startupRounds {
            let folder = try LiveRotationFolder(journalMode: journalMode)
            var processes = (0..<services).map { number in
                RunningProcess(name: "service-\(number)") { folder.service(["start", "Keys", "app.sqlite", journalMode], name: "service-\(number)", output: $0, errors: $1) }
            }
            if withRekey { processes.append(RunningProcess(name: "rekey") { folder.rekey(output: $0, errors: $1) }) }
            for process in processes { try process.start() }
            var outcome = StartupRound()
            for process in processes {
                let status = process.wait()
                guard status != 0 else { continue }
                let line = "round \(round), \(process.name) exited \(status): \(process.stderr.trimmingCharacters(in: .whitespacesAndNewlines))"
                outcome.failures.append(line)
                if process.stderr.contains("none of the configured keys") || status == 74 || status == 65 || process.stderr.contains("SQLite error 26") {
                    outcome.wrongDiagnoses.append(line)
                }
            }
            for failure in outcome.failures { Issue.record("\(failure)") }
            failedProcesses += outcome.failures.count
            if !outcome.wrongDiagnoses.isEmpty { wrongRounds += 1 }
            // The file is intact and on the newest key only, whoever rotated it.
            let keys = try folder.keyList()
            let check = try EncryptedDatabase.check(path: folder.path, keys: keys)
            #expect(check.openedWithKeyID == keys.currentID, "round \(round)")
            let rows = try folder.ledger()
            #expect(rows.keys.count == services, "round \(round): rows of \(rows.keys.sorted())")
        }
        let processes = Self.startupRounds * (services + (withRekey ? 1 : 0))
        print("live-table|start-up \(services) services\(withRekey ? " + rekey" : "") (\(journalMode))|rounds \(Self.startupRounds)|processes \(processes)|failed \(failedProcesses)|rounds with a wrong diagnosis \(wrongRounds)")
        #expect(failedProcesses == 0)
    }
}
