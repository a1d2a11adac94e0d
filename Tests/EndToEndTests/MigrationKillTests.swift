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

    @Test("a process killed at random instants while migrating leaves the database at a migration boundary, intact")
    func killDuringMigration() throws {
        let directory = TemporaryDirectory("migration-kill")
        let hex = TestKeys.hex()
        let environment = ["HARNESS_KEY_HEX": hex, "HARNESS_LEDGER_ROWS": String(Self.rows)]
        let path = directory.file("app.sqlite")
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "harness", source: .hex(hex))])
        let allowed = MigrationState.allowed(ledgerRows: Self.rows)

        // Calibrate with an uninterrupted run.
        let (full, runTime) = try KillTrial(executable: BuiltProduct.crashHarness, arguments: ["migrate", path], environment: environment, directory: directory.path).uninterrupted()
        #expect(full.status == 0, "\(full.stderr)")
        #expect(full.stdout == "applied: 0001_accounts,0002_ledger,0003_index\n")

        var outcomes: [String: Int] = [:]
        var failures = 0
        // For the stress table: "old" = stopped at an earlier migration boundary (or before the
        // file existed), "new" = every migration applied, mismatch = any state between boundaries.
        var tally = CrashTally(path: "kill -9: migration (150,000-row step)")
        let harness = KillTrial(executable: BuiltProduct.crashHarness, arguments: ["migrate", path], environment: environment, directory: directory.path)
        for _ in 0..<Self.trials {
            for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            try harness.killed(after: .nanoseconds(Int64(Double.random(in: 0...1) * runTime.seconds * 1e9)))

            guard FileManager.default.fileExists(atPath: path) else {
                outcomes["no file yet", default: 0] += 1  // killed before the database was created
                tally.record(.openedWithOld)
                continue
            }
            do {
                let database = try EncryptedDatabase(path: path, keys: keys)
                let state = try database.read { try MigrationState.read($0) }
                let integrity = try database.read { try $0.queryValue("PRAGMA integrity_check", as: String.self) }
                if allowed.contains(state) && integrity == "ok" {
                    outcomes[state.description, default: 0] += 1
                    tally.record(state == allowed.last ? .openedWithNew : .openedWithOld)
                } else {
                    failures += 1
                    tally.record(integrity == "ok" ? .checksumMismatch : .unopenable)
                    Issue.record("inconsistent state: \(state), integrity \(integrity ?? "?")")
                }
                // Re-running finishes the job.
                let finished = try EncryptedDatabase(path: path, keys: keys, migrator: HarnessMigrations.migrator(rows: Self.rows))
                #expect(try finished.read { try MigrationState.read($0) } == allowed.last)
            } catch {
                failures += 1
                tally.record(.unopenable)
                Issue.record("\(error)")
            }
        }
        print(tally.row)
        print("kill -9 during migrations, uninterrupted run \(Int(runTime.milliseconds)) ms: \(Self.trials) trials, \(outcomes.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")), inconsistent or unopenable: \(failures)")
        #expect(failures == 0)
    }
}

