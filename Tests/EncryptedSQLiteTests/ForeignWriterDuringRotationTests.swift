@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Testing
import TestSupport

/// The `sqlcipher` shell, a process that knows nothing of this library, writes to the file while
/// an open rotates it: stopped by the pausing test VFS after each of the rotation's lock, unlock,
/// shm, sync, open, close, truncate and delete calls in turn, the rotation waits while the shell
/// runs one `SELECT` and then one `INSERT` with the old key and no busy timeout. Whatever the shell
/// was told, the file must end on the current key with every row it acknowledged, and the shell
/// must have been told the right row count or "done", or a lock or key error, never that the file
/// is damaged.
@Suite("The sqlcipher shell writing while an open rotates the file, at every pause point", .serialized, .ownThread)
struct ForeignWriterDuringRotationTests {
    @Test("every row the shell acknowledged is in the rotated file; the shell reads the right count or hears done, locked or not a database", arguments: StartupDuringRotationTests.cases)
    func everyPausePoint(_ scenario: StartupDuringRotationTests.Case) throws {
        for rowCount in StartupDuringRotationTests.rowCounts { try everyPausePoint(scenario, rowCount: rowCount) }
    }

    private func everyPausePoint(_ scenario: StartupDuringRotationTests.Case, rowCount: Int) throws {
        let scene = try PausePointScene("foreign-writer-points")
        defer { scene.watch.stop() }
        let (path, keys, watch) = (scene.path, scene.keys, scene.watch)
        var options = OpenOptions()
        options.rotationStrategy = scenario.strategy
        let counted: Set<VFSEvent.Operation> = [.lock, .unlock, .shmLock, .sync, .open, .close, .truncate, .delete, .read, .write]
        let files: Set<String> = [path, path + "-journal", path + "-wal"]
        var answers: [String: Int] = [:], reads: [String: Int] = [:], problems: [String] = []
        let rounds = try watch.everyPausePoint(actor: "rotating", counting: { $0.after && files.contains($0.path) && counted.contains($0.operation) }, prepare: {
            try PausePointFile.make(at: path, key: keys.keys[0].cipherKey, journalMode: scenario.journalMode, rows: rowCount).close()
            return { () -> String in
                do {
                    let database = try EncryptedDatabase(path: path, keys: keys, options: options)
                    return database.report.rotated ? "rotated" : "not rotated"
                } catch {
                    return "failed: \(error)"
                }
            }
        }, meanwhile: { _ -> (acknowledged: Bool, answer: String, read: String) in
            // A reader first: it hears the rows there were, or a lock or key error.
            let reader = try SQLCipherShell.run(path, key: scene.ring.keys[0].shellKey, "SELECT count(*) FROM t;")
            let count = reader.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            let read = reader.status == 0 ? (count == "\(rowCount)" ? "read" : "other: read \(count) rows of \(rowCount)") : Self.answer(reader.stderr)
            let result = try SQLCipherShell.run(path, key: scene.ring.keys[0].shellKey, "INSERT INTO t(payload) VALUES (x'5A');")
            return (result.status == 0, result.status == 0 ? "done" : Self.answer(result.stderr), read)
        }, inspect: { round in
            answers[round.meanwhile.answer.hasPrefix("other") ? "other" : round.meanwhile.answer, default: 0] += 1
            reads[round.meanwhile.read.hasPrefix("other") ? "other" : round.meanwhile.read, default: 0] += 1
            if round.meanwhile.answer.hasPrefix("other") { problems.append("pause point \(round.point), \(round.event): the shell said \(round.meanwhile.answer)") }
            if round.meanwhile.read.hasPrefix("other") { problems.append("pause point \(round.point), \(round.event): the reading shell said \(round.meanwhile.read)") }
            if round.outcome.hasPrefix("failed") { problems.append("pause point \(round.point), \(round.event): the rotating open \(round.outcome)") }
            let expected = rowCount + (round.meanwhile.acknowledged ? 1 : 0)
            let (rows, quickCheck) = (try? EncryptedDatabase(path: path, keys: keys).read { db in
                (try db.queryValue("SELECT count(*) FROM t", as: Int.self), try db.queryValue("PRAGMA quick_check", as: String.self))
            }) ?? (nil, nil)
            let onKey = (try? EncryptedDatabase.check(path: path, keys: keys))?.openedWithKeyID
            if rows != expected || quickCheck != "ok" || onKey != keys.currentID {
                problems.append("pause point \(round.point), \(round.event): shell \(round.meanwhile.answer), rotation \(round.outcome); file on \(onKey ?? "no key"), rows \(rows ?? -1) of \(expected), quick_check \(quickCheck ?? "none")")
            }
        })
        print("foreign-writer-points|\(scenario.testDescription), \(rowCount) rows|pause points \(rounds.count)|\(answers.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))|reader: \(reads.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))|problems \(problems.count)")
        for line in problems.prefix(4) { print("problem: \(line)") }
        #expect(rounds.count > 5, "the VFS saw only \(rounds.count) pause points")
        #expect((answers["done"] ?? 0) > 0 && (answers["locked"] ?? 0) > 0, "the shell should get in at some points and be kept out at others: \(answers)")
        #expect((reads["read"] ?? 0) > 0, "the reading shell should read at some points: \(reads)")
        #expect(problems.isEmpty, "\(problems.count) problems; first: \(problems.first ?? "")")
    }

    /// What a shell that failed was told: a lock, a key error, or anything else (a problem).
    static func answer(_ stderr: String) -> String {
        let error = stderr.lowercased()
        return error.contains("locked") || error.contains("busy") || error.contains("locking protocol") ? "locked"
            : error.contains("not a database") ? "not a database" : "other: \(stderr.prefix(200))"
    }
}
