import CSQLCipher
@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Testing
import TestSupport

/// Page re-encryption and the export take a WAL-mode file out of WAL mode first. SQLite does that
/// in two steps: it checkpoints and deletes the WAL under an EXCLUSIVE lock, then writes the new
/// journal mode into page 1 in a transaction of its own. If the lock drops between the two, a
/// connection that starts meanwhile reads a page 1 that still says WAL, opens a new WAL and can
/// commit through it, under a connection about to write page 1 from before those commits. That
/// happened in CI (`LiveRotationTests`, 3 services and `rekey` starting together): another
/// process's rekey through its new WAL, then the old key's page 1 written over it.
///
/// Every order here comes from the pausing test VFS (``VFSWatch``), never from a sleep: the other
/// connection starts when the VFS reports the lock taken, or while the switching connection is
/// stopped inside a chosen VFS call.
@Suite("Leaving WAL mode while other connections start", .serialized)
struct LeavingWALTests {
    /// Rounds of the racing test; raise with LEAVE_WAL_ROUNDS.
    static let rounds = TestKnobs.count("LEAVE_WAL_ROUNDS", default: 30)

    @Test("a connection that starts once the rotation holds its lock gets in only once page 1 says rollback-journal mode, and then does get in")
    func nobodyGetsInHalfway() throws {
        let directory = TemporaryDirectory("leave-wal")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, walMode: true)
        let keys = try ring.keyList(database: path)
        let key = keys.keys[0]
        let watch = VFSWatch(folder: directory.path)
        defer { watch.stop() }
        var left = 0, enteredHalfway = 0, keptOut = 0, startedEarly = 0
        for _ in 1...Self.rounds {
            // A WAL of about 4 MB that nobody checkpointed: leaving WAL mode checkpoints it first,
            // under the lock, while the other connection below keeps trying to read.
            let leaving = try #require(try KeyedConnections(path: path, access: .readWrite, busyTimeout: .seconds(5)).open(with: key))
            _ = try leaving.queryValue("PRAGMA journal_mode = WAL", as: String.self)
            try leaving.execute("PRAGMA wal_autocheckpoint = 0")
            try leaving.execute("""
                CREATE TABLE IF NOT EXISTS filler(payload BLOB);
                DELETE FROM filler;
                WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 1000)
                INSERT INTO filler SELECT randomblob(4000) FROM n;
                """)
            let context = RotationContext(path: path, from: key, to: keys.keys[1], busyTimeout: .seconds(5), verification: .schema,
                                          logger: OpenOptions().logger, files: .system, workers: 1)
            watch.clearEvents()
            // The starter goes when the VFS reports the leaving connection's EXCLUSIVE lock, or when
            // leaveWAL returns without one (every exit path releases it).
            let locked = watch.signal { $0.actor == "leaving" && $0.isLockTaken(FileLockLevel.exclusive) }
            let starter = Starter(path: path, key: key, after: locked)
            starter.start()
            let outcome: RotationContext.WALSwitch
            do {
                VFSWatch.setActor("leaving")
                defer {
                    VFSWatch.setActor(nil)
                    locked.release()
                }
                outcome = try context.leaveWAL(leaving)
            }
            let modeSeen = starter.finish()
            leaving.close()
            guard outcome == .left else { continue }
            left += 1
            // The starter's first file operation came after the lock was taken, by the VFS's order.
            let lockEvent = try #require(locked.reached, "leaveWAL left WAL mode without the VFS seeing an EXCLUSIVE lock")
            let firstTry = watch.events.first { $0.actor == "starter" }
            if let firstTry, firstTry.sequence < lockEvent.sequence { startedEarly += 1 }
            if modeSeen == "wal" { enteredHalfway += 1 }
            // The file is released once it has left WAL mode: the other connection gets in.
            if modeSeen == nil { keptOut += 1 }
        }
        print("leave-wal-table|rounds \(Self.rounds)|left WAL mode \(left)|entered halfway \(enteredHalfway)|kept out 10 s \(keptOut)")
        #expect(left > 0, "no round left WAL mode: the other connection always got in first")
        #expect(startedEarly == 0, "in \(startedEarly) rounds the starter touched the file before the lock was taken")
        #expect(keptOut == 0, "in \(keptOut) of \(left) rounds the file stayed locked after it left WAL mode")
        #expect(enteredHalfway == 0, "in \(enteredHalfway) of \(left) rounds, a connection opened the file in WAL mode while it was being taken out of it")
    }

    /// A connection started on another thread once `after` is signalled, retrying its first read
    /// without waiting until it gets through; `finish()` returns the journal mode it found, `nil`
    /// when it never got in.
    final class Starter: @unchecked Sendable {
        private let path: String
        private let key: ResolvedKey
        private let after: VFSPause
        private let done = DispatchSemaphore(value: 0)
        // Written by the thread before `done` is signalled, read after.
        private var mode: String?

        init(path: String, key: ResolvedKey, after: VFSPause) {
            self.path = path
            self.key = key
            self.after = after
        }

        func start() {
            Thread { [self] in
                defer { done.signal() }
                _ = after.waitUntilReached()
                VFSWatch.setActor("starter")
                defer { VFSWatch.setActor(nil) }
                guard let connection = try? Connection(path: path, access: .readWrite, key: key.cipherKey, busyTimeout: .zero) else { return }
                // Retry at once, inside SQLite, each time a lock is refused: a gap of a few
                // microseconds is enough to get in. Up to 10 s in all (a hang guard).
                sqlite3_busy_handler(connection.handle, { _, attempts in attempts < 1_000_000 ? 1 : 0 }, nil)
                let deadline = ContinuousClock.now + .seconds(10)
                while ContinuousClock.now < deadline {
                    guard (try? connection.queryValue("SELECT count(*) FROM sqlite_master", as: Int.self)) != nil else { continue }
                    mode = try? connection.journalMode()
                    break
                }
                connection.close()
            }.start()
        }

        func finish() -> String? {
            done.wait()
            return mode
        }
    }

    // MARK: Every pause point

    /// How the switching connection leaves WAL mode.
    enum Switch: String, CustomTestStringConvertible, Sendable {
        /// The library's ``RotationContext/leaveWAL(_:)``.
        case library
        /// A plain `PRAGMA journal_mode = DELETE`, as the `sqlcipher` shell or another SQLite
        /// program does (and the library did before acb29b1).
        case plainPragma
        var testDescription: String { rawValue }
    }

    /// What one round did: where the switching connection was stopped, what the other
    /// connection did there, and what the file held afterwards.
    struct Round: CustomStringConvertible {
        var point = 0
        var pausedAt: VFSEvent?
        var other = "not run"
        var switchOutcome = ""
        var opensWith: [String] = []
        var census: PageKeyCensus?
        var rows: Int?
        var damaged: Bool {
            opensWith.count != 1 || rows != Self.rowCount || (census.map { $0.keysInUse != 1 || $0.unauthenticated > 0 } ?? false)
        }
        static let rowCount = 40

        var description: String {
            "pause point \(point), stopped at \(pausedAt.map(String.init(describing:)) ?? "nothing") | other: \(other) | switch: \(switchOutcome) | opens with \(opensWith) | rows \(rows.map(String.init) ?? "-") | pages \(census.map(String.init(describing:)) ?? "-")"
        }
    }

    /// Stops the switching connection after each of its VFS calls in turn (every call, reads and
    /// writes included) and, while it is stopped, lets another connection do what a service
    /// rotating at open or `rekey --strategy engineRekey` does to a WAL-mode file: open it with the
    /// old key, rekey it to the new one through the WAL and checkpoint. Then the switch goes on.
    /// Returns one round per pause point.
    static func everyPausePoint(_ switching: Switch) throws -> [Round] {
        let scene = try PausePointScene("leave-wal-points")
        defer { scene.watch.stop() }
        let (path, watch) = (scene.path, scene.watch)
        let (old, new) = (scene.keys.keys[0], scene.keys.keys[1])
        var rounds: [Round] = []
        _ = try watch.everyPausePoint(actor: "switching", prepare: {
            // The switching connection wrote the rows itself, in WAL mode, and nobody checkpointed.
            let leaving = try PausePointFile.make(at: path, key: old.cipherKey, journalMode: "wal", rows: Round.rowCount) {
                try $0.execute("PRAGMA wal_autocheckpoint = 0")
            }
            let context = RotationContext(path: path, from: old, to: new, busyTimeout: .seconds(5), verification: .schema,
                                          logger: OpenOptions().logger, files: .system, workers: 1)
            return {
                defer { leaving.close() }
                switch switching {
                case .library:
                    return (try? context.leaveWAL(leaving)).map { "\($0)" } ?? "threw"
                case .plainPragma:
                    return (try? leaving.queryValue("PRAGMA journal_mode = DELETE", as: String.self)).map { "mode \($0)" } ?? "threw"
                }
            }
        }, meanwhile: { _ in
            otherConnection(path: path, old: old, new: new)
        }, inspect: { done in
            var round = Round(point: done.point, pausedAt: done.event, other: done.meanwhile, switchOutcome: done.outcome)
            try inspect(&round, path: path, keys: [old, new])
            rounds.append(round)
        })
        return rounds
    }

    /// The other connection's turn: one try at the file with the old key and no waiting; when it
    /// gets in and sees WAL mode, it rekeys the file to `new` through the WAL and checkpoints.
    private static func otherConnection(path: String, old: ResolvedKey, new: ResolvedKey) -> String {
        guard let connection = try? Connection(path: path, access: .readWrite, key: old.cipherKey, busyTimeout: .zero) else { return "could not open" }
        defer { connection.close() }
        do {
            _ = try connection.queryValue("SELECT count(*) FROM sqlite_master", as: Int.self)
        } catch {
            return "kept out (\(error))"
        }
        let mode = (try? connection.journalMode()) ?? "?"
        guard mode == "wal", let newKey = new.cipherKey else { return "read, mode \(mode)" }
        let rekey = connection.rekey(to: newKey)
        let checkpoint = (try? connection.query("PRAGMA wal_checkpoint(TRUNCATE)").map { try $0.get(0, as: Int.self) }) ?? []
        return "read in WAL mode, rekey \(rekey.code), checkpoint \(checkpoint)"
    }

    /// Which key opens the file now, its rows, and which key each page is on.
    private static func inspect(_ round: inout Round, path: String, keys: [ResolvedKey]) throws {
        for key in keys {
            guard let connection = try? Connection(path: path, access: .readWrite, key: key.cipherKey, busyTimeout: .seconds(5)) else { continue }
            defer { connection.close() }
            guard let check = try? connection.queryValue("PRAGMA integrity_check", as: String.self), check == "ok" else { continue }
            round.opensWith.append(key.id)
            round.rows = try? connection.queryValue("SELECT count(*) FROM t", as: Int.self)
            // Everything into the database file, so that the census sees every page.
            _ = try? connection.query("PRAGMA wal_checkpoint(TRUNCATE)").map { try $0.get(0, as: Int.self) }
        }
        round.census = try PageKeyCensus.take(path: path, keys: keys)
    }

    @Test("the library's switch out of WAL mode, stopped after each of its file operations while another connection rekeys through the WAL: the file always ends on one key, rows intact")
    func noPausePointDamagesTheFile() throws {
        let rounds = try Self.everyPausePoint(.library)
        let damaged = rounds.filter(\.damaged)
        let keptOut = rounds.filter { $0.other.hasPrefix("kept out") }.count
        print("leave-wal-points|library|pause points \(rounds.count)|other kept out \(keptOut)|damaged \(damaged.count)")
        for round in damaged.prefix(5) { print("damaged: \(round)") }
        // The switch has many VFS calls (the checkpoint alone reads and writes each page), and the
        // other connection must have been kept out at most of them: a VFS that saw nothing would
        // pass the check below with no rounds.
        #expect(rounds.count >= 20, "only \(rounds.count) pause points: the VFS did not see the switch")
        #expect(keptOut > 0, "the other connection was never kept out: the lock was not observed")
        #expect(damaged.isEmpty, "\(damaged.count) of \(rounds.count) pause points left a damaged file; first: \(damaged.first.map(String.init(describing:)) ?? "")")
    }

    @Test("a plain PRAGMA journal_mode = DELETE, stopped at each pause point: SQLite's two-step gap lets the other connection's rekey in, and the file ends with page 1 on the old key and the rest on the new (the acb29b1 damage)")
    func plainPragmaHasTheGap() throws {
        let rounds = try Self.everyPausePoint(.plainPragma)
        let damaged = rounds.filter(\.damaged)
        print("leave-wal-points|plain PRAGMA|pause points \(rounds.count)|damaged \(damaged.count)")
        for round in damaged.prefix(3) { print("damaged: \(round)") }
        // The known gap outside the library's reach (the Rotating Keys guide names it); finding it
        // here also shows that the pause points reach between SQLite's two steps.
        let acb29b1 = damaged.filter { $0.census?.firstPageKeyID == "k1" && ($0.census?.pages.last?.count ?? 0) > 0 }
        #expect(!acb29b1.isEmpty, "no pause point reproduced page 1 on the old key over pages on the new one")
    }
}
