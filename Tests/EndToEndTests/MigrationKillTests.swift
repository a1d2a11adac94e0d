import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// The state a database may be in after the harness's migrations were interrupted: exactly the
/// state after some prefix of them, never in between.
struct MigrationState: Equatable, CustomStringConvertible {
    let applied: [String]
    let accounts: Int?
    let balance: Int?
    let ledgerRows: Int?
    let hasIndex: Bool

    static func read(_ db: Connection) throws -> MigrationState {
        func tableExists(_ name: String) throws -> Bool {
            (try db.queryValue("SELECT count(*) FROM sqlite_master WHERE name = ?", [name], as: Int.self) ?? 0) > 0
        }
        let applied = try tableExists("encryptedsqlite_migrations")
            ? try db.query("SELECT identifier FROM encryptedsqlite_migrations ORDER BY identifier").map { try $0.get(0, as: String.self) } : []
        let hasAccounts = try tableExists("accounts")
        return MigrationState(
            applied: applied,
            accounts: hasAccounts ? try db.queryValue("SELECT count(*) FROM accounts", as: Int.self) : nil,
            balance: hasAccounts ? try db.queryValue("SELECT sum(balance) FROM accounts", as: Int.self) : nil,
            ledgerRows: try tableExists("ledger") ? try db.queryValue("SELECT count(*) FROM ledger", as: Int.self) : nil,
            hasIndex: try tableExists("ledger_account"))
    }

    /// The only states a user may ever see: after 0, 1, 2 or 3 migrations.
    static func allowed(ledgerRows rows: Int) -> [MigrationState] {
        [
            MigrationState(applied: [], accounts: nil, balance: nil, ledgerRows: nil, hasIndex: false),
            MigrationState(applied: ["0001_accounts"], accounts: 1000, balance: 100_000, ledgerRows: nil, hasIndex: false),
            MigrationState(applied: ["0001_accounts", "0002_ledger"], accounts: 1000, balance: 99_000, ledgerRows: rows, hasIndex: false),
            MigrationState(applied: ["0001_accounts", "0002_ledger", "0003_index"], accounts: 1000, balance: 101_000, ledgerRows: rows, hasIndex: true),
        ]
    }

    var description: String { "after \(applied.count) migration(s)" }
}

@Suite("kill -9 during migrations", .serialized, .ownThread)
struct MigrationKillTests {
    static let trials = TestKnobs.count("MIGRATION_KILL_TRIALS", default: 20)
    static let rows = 150_000

    /// Trials run in two lanes, each on a file of its own: every trial mostly waits for one
    /// process, and one lane of 20 was the suite's longest chain.
    static let lanes = 2

    struct Lane: Sendable {
        var outcomes: [String: Int] = [:]
        var problems: [String] = []
        // For the stress table: "old" = stopped at an earlier migration boundary (or before the
        // file existed), "new" = every migration applied, mismatch = any state between boundaries.
        var tally = CrashTally(path: "kill -9: migration (150,000-row step)")
    }

    @Test("a process killed at random instants while migrating leaves the database at a migration boundary, intact")
    func killDuringMigration() throws {
        let hex = TestKeys.hex()
        let environment = ["HARNESS_KEY_HEX": hex, "HARNESS_LEDGER_ROWS": String(Self.rows)]

        // Calibrate with an uninterrupted run.
        let calibration = TemporaryDirectory("migration-kill")
        let (full, runTime) = try KillTrial(executable: BuiltProduct.crashHarness, arguments: ["migrate", calibration.file("app.sqlite")],
                                            environment: environment, directory: calibration.path).uninterrupted()
        #expect(full.status == 0, "\(full.stderr)")
        #expect(full.stdout == "applied: 0001_accounts,0002_ledger,0003_index\n")

        let lanes = try OwnThread.lanes(Self.lanes) { lane in
            try Self.trials(Self.trials / Self.lanes + (lane < Self.trials % Self.lanes ? 1 : 0), hex: hex, environment: environment, runTime: runTime)
        }
        var outcomes: [String: Int] = [:]
        var tally = CrashTally(path: lanes[0].tally.path)
        var problems: [String] = []
        for lane in lanes {
            outcomes.merge(lane.outcomes, uniquingKeysWith: +)
            tally.add(lane.tally)
            problems += lane.problems
        }
        for problem in problems { Issue.record(Comment(rawValue: problem)) }
        print(tally.row)
        print("kill -9 during migrations, uninterrupted run \(Int(runTime.milliseconds)) ms: \(Self.trials) trials in \(Self.lanes) lanes, \(outcomes.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")), inconsistent or unopenable: \(problems.count)")
        #expect(tally.trials == Self.trials)
        #expect(problems.isEmpty)
    }

    /// `count` trials on a file of their own: migrate, kill at a random instant of `runTime`, then
    /// check that the file is at a migration boundary, intact, and that a new run finishes the job.
    private static func trials(_ count: Int, hex: String, environment: [String: String], runTime: Duration) throws -> Lane {
        let directory = TemporaryDirectory("migration-kill")
        let path = directory.file("app.sqlite")
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "harness", source: .hex(hex))])
        let allowed = MigrationState.allowed(ledgerRows: Self.rows)
        let harness = KillTrial(executable: BuiltProduct.crashHarness, arguments: ["migrate", path], environment: environment, directory: directory.path)
        var lane = Lane()
        for _ in 0..<count {
            for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            try harness.killed(after: .nanoseconds(Int64(Double.random(in: 0...1) * runTime.seconds * 1e9)))

            guard FileManager.default.fileExists(atPath: path) else {
                lane.outcomes["no file yet", default: 0] += 1  // killed before the database was created
                lane.tally.record(.openedWithOld)
                continue
            }
            do {
                let database = try EncryptedDatabase(path: path, keys: keys)
                let state = try database.read { try MigrationState.read($0) }
                let integrity = try database.read { try $0.queryValue("PRAGMA integrity_check", as: String.self) }
                if allowed.contains(state) && integrity == "ok" {
                    lane.outcomes[state.description, default: 0] += 1
                    lane.tally.record(state == allowed.last ? .openedWithNew : .openedWithOld)
                } else {
                    lane.tally.record(integrity == "ok" ? .checksumMismatch : .unopenable)
                    lane.problems.append("inconsistent state: \(state), integrity \(integrity ?? "?")")
                }
                // Re-running finishes the job.
                let finished = try EncryptedDatabase(path: path, keys: keys, migrator: HarnessMigrations.migrator(rows: Self.rows))
                let final = try finished.read { try MigrationState.read($0) }
                if final != allowed.last { lane.problems.append("a new run left \(final), not every migration") }
            } catch {
                lane.tally.record(.unopenable)
                lane.problems.append("\(error)")
            }
        }
        return lane
    }
}

