@testable import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// Async writes that wait for the writer at the same moment share one transaction (group commit,
/// `OpenOptions.groupCommit`): each closure still runs once, a closure that throws loses only its
/// own changes and only its caller sees the error, and a closure that leaves deferred foreign keys
/// violated fails alone, as its own commit would have made it fail.
@Suite("Group commit of async writes")
struct GroupCommitTests {
    /// Counts closure runs across threads.
    final class Runs: @unchecked Sendable {
        private let lock = NSLock()
        private var counts: [Int: Int] = [:]
        func ran(_ id: Int) { lock.withLock { counts[id, default: 0] += 1 } }
        var all: [Int: Int] { lock.withLock { counts } }
    }

    struct Refused: Error, Equatable { let id: Int }

    /// Holds the writer with a blocking write, run on the writer queue itself, until `writes` async
    /// writes wait behind it, so that the next drain takes them together. The order comes from
    /// the count of waiting writes (``PendingWrites/count``), not from a sleep.
    static func holdWriter(_ database: EncryptedDatabase, until writes: Int) -> DispatchSemaphore {
        let started = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        database.writer.queue.async {
            try? database.write { _ in
                started.signal()
                // A poll of the queue's length (the deadline is only a hang guard): the writes
                // queued behind the writer are what the test then checks.
                let deadline = ContinuousClock.now + .seconds(60)
                while database.writer.pendingWrites.count < writes && ContinuousClock.now < deadline { usleep(1000) }
            }
            done.signal()
        }
        started.wait()
        return done
    }

    @Test("60 concurrent writes, every 4th throwing: the others' rows are there, the thrown ones' are not, each closure ran once", arguments: [false, true])
    func failuresStayWithTheirCaller(groupCommit: Bool) async throws {
        let directory = TemporaryDirectory("group-commit")
        let path = directory.file("db.sqlite")
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "k", source: .hex(TestKeys.hex()))])
        var options = OpenOptions(createIfMissing: true, concurrentReaders: 2)
        options.groupCommit = groupCommit
        let database = try EncryptedDatabase(path: path, keys: keys, options: options)
        try await database.write { db in try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, note TEXT)") }
        let runs = Runs()
        let held = Self.holdWriter(database, until: 60)
        let outcomes = await withTaskGroup(of: (Int, Result<Int, Refused>).self) { group in
            for id in 1...60 {
                group.addTask {
                    do {
                        let value = try await database.write { db in
                            runs.ran(id)
                            try db.execute("INSERT INTO t(id, note) VALUES (?, ?)", [id, "row \(id)"])
                            if id % 4 == 0 { throw Refused(id: id) }
                            return id * 10
                        }
                        return (id, .success(value))
                    } catch let error as Refused {
                        return (id, .failure(error))
                    } catch {
                        Issue.record("write \(id) failed with \(error)")
                        return (id, .failure(Refused(id: -1)))
                    }
                }
            }
            var outcomes: [Int: Result<Int, Refused>] = [:]
            for await (id, outcome) in group { outcomes[id] = outcome }
            return outcomes
        }
        held.wait()
        for id in 1...60 {
            #expect(outcomes[id] == (id % 4 == 0 ? .failure(Refused(id: id)) : .success(id * 10)))
        }
        #expect(runs.all == Dictionary(uniqueKeysWithValues: (1...60).map { ($0, 1) }))
        let stored = try await database.read { db in try db.query("SELECT id FROM t ORDER BY id").map { try $0.get(0, as: Int.self) } }
        #expect(stored == (1...60).filter { $0 % 4 != 0 })
        // The writes queued behind the held writer ran in shared transactions (or, without group
        // commit, one by one).
        let largest = database.writer.pendingWrites.largestGroup.withLock { $0 }
        #expect(groupCommit ? largest > 1 : largest == 0)
    }

    @Test("a write that leaves a deferred foreign key violated fails alone, with the commit's constraint error; the writes beside it commit")
    func deferredForeignKeysFailAlone() async throws {
        let scratch = try Scratch()
        let database = scratch.database
        try await database.write { db in
            try db.execute("""
                CREATE TABLE parent(id INTEGER PRIMARY KEY);
                CREATE TABLE child(id INTEGER PRIMARY KEY, parent INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);
                INSERT INTO parent(id) VALUES (1);
                """)
        }
        let held = Self.holdWriter(database, until: 6)
        let outcomes = await withTaskGroup(of: (Int, (any Error)?).self) { group in
            for id in 1...6 {
                group.addTask {
                    do {
                        // Write 3 points at a parent that does not exist.
                        try await database.write { db in try db.execute("INSERT INTO child(id, parent) VALUES (?, ?)", [id, id == 3 ? 99 : 1]) }
                        return (id, nil)
                    } catch {
                        return (id, error)
                    }
                }
            }
            var outcomes: [Int: (any Error)?] = [:]
            for await (id, error) in group { outcomes[id] = error }
            return outcomes
        }
        held.wait()
        for id in 1...6 where id != 3 { #expect(outcomes[id]! == nil) }
        let error = try #require(outcomes[3]! as? SQLiteError)
        #expect(error.code.primary == .constraint)
        #expect(error.message.contains("FOREIGN KEY"))
        let children = try await database.read { db in try db.query("SELECT id FROM child ORDER BY id").map { try $0.get(0, as: Int.self) } }
        #expect(children == [1, 2, 4, 5, 6])
        #expect(database.writer.pendingWrites.largestGroup.withLock { $0 } > 1)
        withExtendedLifetime(scratch) {}
    }
}
