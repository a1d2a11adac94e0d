import DurableFiles
@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Testing
import TestSupport

/// A running service (an open database of the library) writes and reads while another opens the
/// file and rotates it, by each strategy: page re-encryption, the engine's rekey, and an export
/// (a page size change, which replaces the file). The rotating open is stopped after each of its
/// file operations on the database and its side files in turn by the pausing test VFS; while it
/// is stopped, the service commits a row and counts the rows, with no busy timeout.
///
/// The service answers done or busy, or, during an export, steps aside and finishes its access
/// on the new file once the export is done; it never gets another error. Afterwards the file is
/// on the current key with every row the service acknowledged, and the service's next read and
/// write run on that file (never on the replaced one). Both databases are in this process: SQLite
/// keeps locks per connection and the step-aside lock per descriptor, so they meet as two
/// processes would.
@Suite("A running service while another open rotates the file, at every pause point", .serialized, .ownThread)
struct ServiceDuringRotationTests {
    /// Rows of the file; PAUSE_POINT_ROWS (comma-separated) for stress runs at other sizes.
    static let rowCounts = PausePointSizes.rows(default: 40)

    enum Strategy: String, Sendable {
        case pageReencryption, engineRekey, export
    }

    struct Case: CustomTestStringConvertible, Sendable {
        let journalMode: String
        let strategy: Strategy
        var testDescription: String { "\(journalMode), \(strategy)" }
    }

    static let cases = ["delete", "wal"].flatMap { mode in
        [Strategy.pageReencryption, .engineRekey, .export].map { Case(journalMode: mode, strategy: $0) }
    }

    /// The service's access of one round, run on a thread of its own: it may wait aside until the
    /// rotation is done, after the round's pause was released.
    final class Access: @unchecked Sendable {
        private let condition = NSCondition()
        private var answer: String?

        func finish(_ text: String) {
            condition.withLock {
                answer = text
                condition.broadcast()
            }
        }

        /// Waits until the access answered or `aside()` says the service waits aside.
        func waitUntilAnsweredOrAside(_ aside: () -> Bool) -> String {
            let guardLimit = Date().addingTimeInterval(600)  // a hang guard only
            return condition.withLock {
                while answer == nil && !aside() && Date() < guardLimit { _ = condition.wait(until: Date().addingTimeInterval(0.001)) }
                return answer ?? "aside"
            }
        }

        /// Waits for the answer (after the rotation ended).
        func answered() -> String {
            let guardLimit = Date().addingTimeInterval(600)  // a hang guard only
            return condition.withLock {
                while answer == nil && Date() < guardLimit { _ = condition.wait(until: guardLimit) }
                return answer ?? "no answer"
            }
        }
    }

    @Test("the service commits, hears busy or steps aside; every acknowledged row is in the file, which ends on the current key; the service then serves that file", arguments: cases)
    func everyPausePoint(_ scenario: Case) throws {
        for rowCount in Self.rowCounts { try everyPausePoint(scenario, rowCount: rowCount) }
    }

    private func everyPausePoint(_ scenario: Case, rowCount: Int) throws {
        let scene = try PausePointScene("service-points")
        defer { scene.watch.stop() }
        let (path, watch) = (scene.path, scene.watch)
        let old = scene.ring.keys[0].key
        let pageSize = SQLCipherEngine.linked.defaultGeneration.format.pageSize
        let new = scenario.strategy == .export
            ? DatabaseKey(id: "new", source: scene.ring.keys[1].key.source, cipher: CipherSettings(pageSize: 2 * pageSize))
            : DatabaseKey(id: "new", source: scene.ring.keys[1].key.source)
        let keys = try KeyList(database: path, keys: [old, new])
        var rotating = OpenOptions()
        rotating.rotationStrategy = scenario.strategy == .engineRekey ? .engineRekey : .automatic
        var serving = OpenOptions(busyTimeout: .zero, concurrentReaders: scenario.journalMode == "wal" ? 2 : 0)
        serving.rotateToCurrentKey = false

        var service: EncryptedDatabase?
        var access = Access()
        var outcomes: [String: Int] = [:], wrong: [String] = [], damaged: [String] = []
        let files: Set<String> = [path, path + "-journal", path + "-wal"]
        let rounds = try watch.everyPausePoint(actor: "rotating", counting: { $0.after && files.contains($0.path) && $0.operation != .read }, prepare: {
            service = nil
            try PausePointFile.make(at: path, key: keys.keys[0].cipherKey, journalMode: scenario.journalMode, rows: rowCount).close()
            service = try EncryptedDatabase(path: path, keys: keys, options: serving)
            return { () -> String in
                do {
                    let database = try EncryptedDatabase(path: path, keys: keys, options: rotating)
                    return "rotated by \(database.report.rotation.map { "\($0.method)" } ?? "nobody")"
                } catch {
                    return "failed: \(error)"
                }
            }
        }, meanwhile: { _ -> String in
            let running = try #require(service)
            access = Access()
            let round = access
            Thread {
                // The write is acknowledged once it returned, whatever the read then hears.
                var wrote = false
                do {
                    try running.write { try $0.execute("INSERT INTO t(payload) VALUES (x'5a')") }
                    wrote = true
                    let rows = try running.read { try $0.queryValue("SELECT count(*) FROM t", as: Int.self) } ?? -1
                    round.finish("done, \(rows) rows")
                } catch let error as SQLiteError where error.code.primary == .busy || error.code.primary == .locked {
                    round.finish(wrote ? "wrote, read busy" : "busy")
                } catch let error as EncryptedDatabaseError where error.category == .busy {
                    round.finish(wrote ? "wrote, read busy" : "busy")
                } catch {
                    round.finish("wrong: \(error)")
                }
            }.start()
            return round.waitUntilAnsweredOrAside { running.follower.steppedAside.withLock { $0 } }
        }, inspect: { round in
            let answer = access.answered()
            let kind = answer.hasPrefix("done") ? (round.meanwhile == "aside" ? "stepped aside, then done" : "done") : answer
            outcomes[kind, default: 0] += 1
            let acknowledged = answer.hasPrefix("done") || answer.hasPrefix("wrote") ? 1 : 0
            if answer.hasPrefix("wrong") || answer == "no answer" {
                wrong.append("pause point \(round.point), \(round.event): service \(answer)")
            }
            if round.outcome.hasPrefix("failed") { wrong.append("pause point \(round.point), \(round.event): rotating open \(round.outcome)") }
            // The file now: on the current key, with the rows made and the one acknowledged.
            let check = try? EncryptedDatabase.check(path: path, keys: keys)
            let (rows, quickCheck) = (try? EncryptedDatabase(path: path, keys: keys).read { db in
                (try db.queryValue("SELECT count(*) FROM t", as: Int.self), try db.queryValue("PRAGMA quick_check", as: String.self))
            }) ?? (-1, "not run")
            let census = scenario.strategy == .export || scenario.journalMode == "wal" ? nil : try PageKeyCensus.take(path: path, keys: keys.keys)
            let onOneKey = census.map { $0.keysInUse == 1 && $0.unauthenticated == 0 } ?? true
            if check?.openedWithKeyID != keys.currentID || rows != rowCount + acknowledged || quickCheck != "ok" || !onOneKey {
                damaged.append("pause point \(round.point), \(round.event): service \(answer); on \(check?.openedWithKeyID ?? "no key"), rows \(rows ?? -1) of \(rowCount + acknowledged), quick_check \(quickCheck ?? "none"), pages \(census.map(String.init(describing:)) ?? "-")")
            }
            // The service serves the file as it is now: its read sees every row, its write lands there.
            if let running = service {
                let seen = (try? running.read { try $0.queryValue("SELECT count(*) FROM t", as: Int.self) }) ?? nil
                let wrote = (try? running.write { try $0.execute("INSERT INTO t(payload) VALUES (x'5b')") }) != nil
                let after = (try? EncryptedDatabase.check(path: path, keys: keys)).flatMap { _ in
                    try? EncryptedDatabase(path: path, keys: keys).read { try $0.queryValue("SELECT count(*) FROM t", as: Int.self) }
                } ?? nil
                if seen != rows || !wrote || after != (rows ?? -1) + 1 {
                    damaged.append("pause point \(round.point), \(round.event): afterwards the service read \(seen ?? -1) rows of \(rows ?? -1), wrote \(wrote), the file has \(after ?? -1)")
                }
            }
        })
        service = nil
        print("service-points|\(scenario.testDescription), \(rowCount) rows|pause points \(rounds.count)|\(outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))|wrong \(wrong.count)|damaged \(damaged.count)")
        for line in (wrong + damaged).prefix(4) { print("problem: \(line)") }
        #expect(rounds.count > 10, "the VFS saw only \(rounds.count) pause points")
        if scenario.strategy == .export {
            // Most points come after the announce, where the service waits aside.
            #expect((outcomes["stepped aside, then done"] ?? 0) > 0, "the service never stepped aside")
        } else {
            #expect((outcomes["busy"] ?? 0) > 0, "the service never met the rotation's lock")
        }
        #expect(wrong.isEmpty, "\(wrong.count) wrong outcomes; first: \(wrong.first ?? "")")
        #expect(damaged.isEmpty, "\(damaged.count) rounds left the file or the service wrong; first: \(damaged.first ?? "")")
    }
}
