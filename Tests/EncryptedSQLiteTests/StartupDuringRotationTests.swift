@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Testing
import TestSupport

/// A service that starts while another one rotates the file at its own start: at every point of
/// the rotation, the newcomer either opens the file on the key it is on (rotating it itself when
/// it gets there first) or is told the file is busy; it never gets "no key opens" or another
/// wrong diagnosis, and the file always ends on the current key with every row.
///
/// Both are `EncryptedDatabase`s of this process: SQLite keeps locks per connection inside a
/// process too, so they meet as two processes would. The rotating open is stopped after each of
/// its file operations on the database and its journal in turn by the pausing test VFS, and the
/// newcomer opens while it is stopped, with no busy timeout (a wait would only hide the answer).
@Suite("Opening while another open rotates the file, at every pause point", .serialized)
struct StartupDuringRotationTests {
    /// Rows of the file; PAUSE_POINT_ROWS (comma-separated) for stress runs at other sizes.
    static let rowCounts = PausePointSizes.rows(default: 40)

    struct Case: CustomTestStringConvertible, Sendable {
        let journalMode: String
        let strategy: RotationStrategy
        var testDescription: String { "\(journalMode), \(strategy)" }
    }

    static let cases = [
        Case(journalMode: "delete", strategy: .automatic), Case(journalMode: "wal", strategy: .automatic),
        Case(journalMode: "delete", strategy: .engineRekey), Case(journalMode: "wal", strategy: .engineRekey),
    ]

    @Test("the newcomer opens on the right key or hears busy; the file ends on the current key, on one key, with every row", arguments: cases)
    func everyPausePoint(_ scenario: Case) throws {
        for rowCount in Self.rowCounts { try everyPausePoint(scenario, rowCount: rowCount) }
    }

    private func everyPausePoint(_ scenario: Case, rowCount: Int) throws {
        let scene = try PausePointScene("startup-points")
        defer { scene.watch.stop() }
        let (path, keys, watch) = (scene.path, scene.keys, scene.watch)
        var rotating = OpenOptions()
        rotating.rotationStrategy = scenario.strategy
        var newcomer = OpenOptions()
        newcomer.busyTimeout = .zero
        var outcomes: [String: Int] = [:], wrong: [String] = [], damaged: [String] = []
        let files: Set<String> = [path, path + "-journal", path + "-wal"]
        let rounds = try watch.everyPausePoint(actor: "rotating", counting: { $0.after && files.contains($0.path) && $0.operation != .read }, prepare: {
            try PausePointFile.make(at: path, key: keys.keys[0].cipherKey, journalMode: scenario.journalMode, rows: rowCount).close()
            return { () -> String in
                do {
                    let database = try EncryptedDatabase(path: path, keys: keys, options: rotating)
                    return "opened on \(database.report.openedWithKeyID), \(database.report.rotated ? "rotated" : "not rotated")"
                } catch {
                    return "failed: \(error)"
                }
            }
        }, meanwhile: { _ -> String in
            do {
                let database = try EncryptedDatabase(path: path, keys: keys, options: newcomer)
                let rows = try database.read { try $0.queryValue("SELECT count(*) FROM t", as: Int.self) }
                return "opened, \(database.report.rotated ? "rotated" : "current"), \(rows ?? -1) rows"
            } catch let error as EncryptedDatabaseError {
                switch error {
                case .busy: return "busy"
                case .changedByAnotherProcess: return "changed by another process"
                default: return "wrong: \(error)"
                }
            } catch {
                return "wrong: \(error)"
            }
        }, inspect: { round in
            let kind = round.meanwhile.hasPrefix("opened") ? String(round.meanwhile.prefix(while: { $0 != "," })) + (round.meanwhile.contains("rotated") ? " and rotated" : "") : round.meanwhile
            outcomes[kind, default: 0] += 1
            if round.meanwhile.hasPrefix("wrong") || (round.meanwhile.hasPrefix("opened") && !round.meanwhile.hasSuffix("\(rowCount) rows")) {
                wrong.append("pause point \(round.point), \(round.event): newcomer \(round.meanwhile)")
            }
            if round.outcome.hasPrefix("failed") { wrong.append("pause point \(round.point), \(round.event): rotating open \(round.outcome)") }
            // The file now: the current key opens it with every row; every page is on it.
            let check = try? EncryptedDatabase.check(path: path, keys: keys)
            let census = try PageKeyCensus.take(path: path, keys: keys.keys)
            let (rows, quickCheck) = (try? EncryptedDatabase(path: path, keys: keys).read { db in
                (try db.queryValue("SELECT count(*) FROM t", as: Int.self), try db.queryValue("PRAGMA quick_check", as: String.self))
            }) ?? (-1, "not run")
            let onOneKey = scenario.journalMode == "wal" || census.map { $0.keysInUse == 1 && $0.unauthenticated == 0 } ?? true
            if check?.openedWithKeyID != keys.currentID || rows != rowCount || quickCheck != "ok" || !onOneKey {
                damaged.append("pause point \(round.point), \(round.event): on \(check?.openedWithKeyID ?? "no key"), rows \(rows ?? -1), quick_check \(quickCheck ?? "none"), pages \(census.map(String.init(describing:)) ?? "-")")
            }
        })
        print("startup-points|\(scenario.testDescription), \(rowCount) rows|pause points \(rounds.count)|\(outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))|wrong \(wrong.count)|damaged \(damaged.count)")
        for line in (wrong + damaged).prefix(4) { print("problem: \(line)") }
        #expect(rounds.count > 10, "the VFS saw only \(rounds.count) pause points")
        #expect((outcomes["busy"] ?? 0) > 0, "the newcomer never met the rotation's lock")
        #expect(wrong.isEmpty, "\(wrong.count) wrong outcomes; first: \(wrong.first ?? "")")
        #expect(damaged.isEmpty, "\(damaged.count) rounds left the file wrong; first: \(damaged.first ?? "")")
    }
}
