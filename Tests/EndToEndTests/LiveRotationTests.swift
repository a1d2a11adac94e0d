import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// Key rotation while other processes use the database (issue 13): processes starting up at the
/// same instant as a rotation never get a wrong diagnosis, and running services keep serving
/// through rotations made by `rekey` or by one of them.
@Suite("Rotation while other processes use the database", .serialized, .ownThread)
struct LiveRotationTests {
    /// Rounds of concurrent start-up per case; raise with LIVE_STARTUP_ROUNDS for stress runs.
    static let startupRounds = TestKnobs.count("LIVE_STARTUP_ROUNDS", default: 8)

    /// Rotations per running-services case; raise with LIVE_ROTATIONS for stress runs.
    static let rotations = TestKnobs.count("LIVE_ROTATIONS", default: 4)
    /// Service processes per running-services case (LIVE_SERVICES).
    static let serviceCount = TestKnobs.count("LIVE_SERVICES", default: 2)
    static let seed = TestKnobs.seed("REKEY_KILL_SEED")

    /// Who rotates while the services run.
    enum Rotator: String, CustomStringConvertible, CaseIterable {
        /// `rekey` with the automatic strategy (page re-encryption when it can run).
        case rekey
        /// `rekey --strategy engineRekey` (SQLCipher's own rekey).
        case rekeyEngine
        /// Service 0, through `rotateToCurrentKey()` after the Keys file gained a key.
        case service
        /// `rekey`, killed with SIGKILL at a random instant of each rotation.
        case rekeyKilled
        /// `rekey` to keys whose page size differs from the file's: every rotation is an export,
        /// which replaces the file while the services have it open (they step aside).
        case rekeyExport
        /// As `rekeyExport`, with `rekey` killed with SIGKILL at a random instant of each rotation
        /// (the services, waiting aside, go on when it dies).
        case rekeyExportKilled

        var killed: Bool { self == .rekeyKilled || self == .rekeyExportKilled }
        var exports: Bool { self == .rekeyExport || self == .rekeyExportKilled }
        var description: String { rawValue }
    }

    @Test("services writing and reading while others rotate the file: no failed operation, no lost write, the services follow every rotation",
          arguments: ["wal", "delete"], Rotator.allCases)
    func runningServices(journalMode: String, rotator: Rotator) throws {
        var folder = try LiveRotationFolder(journalMode: journalMode, listed: 0)
        let names = (0..<Self.serviceCount).map { "service-\($0)" }
        let services = names.map { name in
            RunningProcess(name: name) { folder.service(["serve", "Keys", "app.sqlite", journalMode, "600"], name: name, output: $0, errors: $1) }
        }
        for service in services { try service.start() }
        defer {
            _ = FileManager.default.createFile(atPath: folder.path + ".stop", contents: nil)
            for service in services { service.wait() }
        }
        Self.waitUntilServing(services, "after start-up")

        var random = SeededRandom(seed: Self.seed)
        var rotationTimes: [Duration] = [], killed = 0
        var window = Duration.milliseconds(300)
        for number in 1...Self.rotations {
            folder.appendKey(pageSize: rotator.exports ? (number % 2 == 1 ? 2048 : 8192) : nil)
            let start = ContinuousClock.now
            switch rotator {
            case .rekey, .rekeyEngine, .rekeyKilled, .rekeyExport, .rekeyExportKilled:
                let rekey = RunningProcess(name: "rekey") { folder.rekey(rotator == .rekeyEngine ? ["--strategy", "engineRekey"] : [], output: $0, errors: $1) }
                try rekey.start()
                if rotator.killed, number > 1 {
                    // Not an order: the kill instant is meant to be random (within about the first
                    // rotation's time); the services must see no failure wherever it lands.
                    sleep(for: .nanoseconds(Int64(Double.random(in: 0...1.2, using: &random) * window.seconds * 1e9)))
                    if rekey.signal(SIGKILL) { killed += 1 }
                }
                let status = rekey.wait()
                if status != 128 + SIGKILL {
                    #expect(status == 0, "rotation \(number): rekey exited \(status): \(rekey.stderr)")
                    rotationTimes.append(ContinuousClock.now - start)
                    if rotator.killed, number == 1 { window = ContinuousClock.now - start }
                }
            case .service:
                _ = FileManager.default.createFile(atPath: folder.path + ".rotate-service-0", contents: nil)
                // Service 0 says when its rotateToCurrentKey() has returned (or failed).
                let answered = services[0].lines?.wait(limit: .seconds(30)) { lines in
                    lines.count { $0.text.hasPrefix("rotated by service") || $0.text.hasPrefix("failed rotate") } >= number
                } ?? false
                #expect(answered, "rotation \(number): service 0 did not rotate")
                let keys = try folder.keyList()
                #expect(try EncryptedDatabase.check(path: folder.path, keys: keys).openedWithKeyID == keys.currentID,
                        "rotation \(number): the file is not on the new key after service 0's rotation")
                rotationTimes.append(ContinuousClock.now - start)
            }
            Self.waitUntilServing(services, "after rotation \(number)")
        }
        // A killed last rotation leaves the file on the previous key: rotate once more, uninterrupted.
        if rotator.killed {
            let rekey = RunningProcess(name: "rekey") { folder.rekey(output: $0, errors: $1) }
            try rekey.start()
            #expect(rekey.wait() == 0, "\(rekey.stderr)")
            Self.waitUntilServing(services, "after the last rotation")
        }
        _ = FileManager.default.createFile(atPath: folder.path + ".stop", contents: nil)

        var failed = 0, lost = 0, longestPause = 0, operations = 0
        for service in services { service.wait() }
        let ledger = try folder.ledger()
        for service in services {
            let status = service.wait()
            #expect(status == 0, "\(service.name) exited \(status): \(service.stderr.suffix(2000))")
            let lines = service.stdout.split(separator: "\n")
            let failures = lines.filter { $0.hasPrefix("failed ") }
            for failure in failures.prefix(3) { Issue.record("\(service.name): \(failure)") }
            if !failures.isEmpty, LiveRotationFolder.logLevel != nil {
                Issue.record("\(service.name)'s log (HARNESS_LOG): \(service.stderr.suffix(6000))")
            }
            failed += failures.count
            let committed = Set(lines.compactMap { $0.hasPrefix("committed ") ? Int($0.dropFirst(10)) : nil })
            lost += committed.subtracting(ledger[service.name] ?? []).count
            if let summary = lines.last(where: { $0.hasPrefix("summary ") }) {
                let fields = Dictionary(uniqueKeysWithValues: summary.dropFirst(8).split(separator: " ").map { field in
                    let parts = field.split(separator: "=", maxSplits: 1)
                    return (String(parts[0]), String(parts.count > 1 ? parts[1] : ""))
                })
                longestPause = max(longestPause, Int(fields["longest-pause-ms"] ?? "") ?? 0)
                operations += Int(fields["operations"] ?? "") ?? 0
                #expect(try fields["key"] == folder.keyList().currentID, "\(service.name) ended on key \(fields["key"] ?? "?")")
            } else {
                Issue.record("\(service.name) printed no summary: \(service.stderr.suffix(2000))")
            }
            #expect(committed.count > 0, "\(service.name) committed nothing")
        }
        let keys = try folder.keyList()
        #expect(try EncryptedDatabase.check(path: folder.path, keys: keys).openedWithKeyID == keys.currentID)
        let longestRotation = rotationTimes.map { Int($0.seconds * 1000) }.max() ?? 0
        print("live-table|\(Self.serviceCount) services (\(journalMode)), \(Self.rotations) rotations by \(rotator)\(rotator.killed ? " (\(killed) killed, seed \(Self.seed))" : "")|operations \(operations)|failed \(failed)|lost writes \(lost)|longest pause \(longestPause) ms|longest rotation \(longestRotation) ms")
        #expect(failed == 0)
        #expect(lost == 0)
    }

    /// Blocks until every service has, from now on, committed 2 more rows and read 2 more times on
    /// each of its reader threads: it serves on the file as it is now (after a rotation, the second
    /// of each began after the rotation ended). The order comes from the services' lines, not from
    /// a sleep; a service that stops serving is a failure (after a hang guard).
    static func waitUntilServing(_ services: [RunningProcess], _ when: String) {
        let operations = ["committed ", "read by 0", "read by 1"]
        for service in services {
            guard let lines = service.lines else { continue }
            let marks = operations.map { lines.count(prefix: $0) }
            let serving = lines.wait(limit: .seconds(60)) { lines in
                zip(operations, marks).allSatisfy { operation, mark in lines.count { $0.text.hasPrefix(operation) } >= mark + 2 }
            }
            if !serving {
                Issue.record("\(service.name) did not commit and read \(when): \(lines.lines.suffix(3).map(\.text)) \(service.stderr.suffix(1000))")
            }
        }
    }

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
