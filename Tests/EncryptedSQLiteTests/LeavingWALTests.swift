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
@Suite("Leaving WAL mode while other connections start", .serialized)
struct LeavingWALTests {
    /// Rounds; raise with LEAVE_WAL_ROUNDS.
    static let rounds = Int(ProcessInfo.processInfo.environment["LEAVE_WAL_ROUNDS"] ?? "") ?? 30

    @Test("a connection that starts while the rotation leaves WAL mode gets in only once page 1 says rollback-journal mode, and then does get in")
    func nobodyGetsInHalfway() throws {
        let directory = TemporaryDirectory("leave-wal")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, walMode: true)
        let keys = try ring.keyList(database: path)
        let key = keys.keys[0]
        var left = 0, enteredHalfway = 0, keptOut = 0
        for _ in 1...Self.rounds {
            // A WAL of about 4 MB that nobody checkpointed: leaving WAL mode checkpoints it first,
            // under the lock, while the other connection below keeps trying to read.
            let leaving = try #require(try KeyTrial(path: path, access: .readWrite, busyTimeout: .seconds(5)).open(with: key))
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
            let starter = Starter(path: path, key: key)
            starter.start()
            let outcome = try context.leaveWAL(leaving)
            let modeSeen = starter.finish()
            leaving.close()
            guard outcome == .left else { continue }
            left += 1
            if modeSeen == "wal" { enteredHalfway += 1 }
            // The file is released once it has left WAL mode: the other connection gets in.
            if modeSeen == nil { keptOut += 1 }
        }
        print("leave-wal-table|rounds \(Self.rounds)|left WAL mode \(left)|entered halfway \(enteredHalfway)|kept out 10 s \(keptOut)")
        #expect(left > 0, "no round left WAL mode: the other connection always got in first")
        #expect(keptOut == 0, "in \(keptOut) of \(left) rounds the file stayed locked after it left WAL mode")
        #expect(enteredHalfway == 0, "in \(enteredHalfway) of \(left) rounds, a connection opened the file in WAL mode while it was being taken out of it")
    }

    /// A connection started on another thread a moment after `start()`, retrying its first read
    /// without waiting until it gets through; `finish()` returns the journal mode it found, `nil`
    /// when it never got in.
    final class Starter: @unchecked Sendable {
        private let path: String
        private let key: ResolvedKey
        private let done = DispatchSemaphore(value: 0)
        // Written by the thread before `done` is signalled, read after.
        private var mode: String?

        init(path: String, key: ResolvedKey) {
            self.path = path
            self.key = key
        }

        func start() {
            Thread { [self] in
                defer { done.signal() }
                usleep(2000)  // the leaving connection holds its lock by now
                guard let connection = try? Connection(path: path, access: .readWrite, key: key.cipherKey, busyTimeout: .zero) else { return }
                // Retry at once, inside SQLite, each time a lock is refused: a gap of a few
                // microseconds is enough to get in. Up to 10 s in all.
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
}
