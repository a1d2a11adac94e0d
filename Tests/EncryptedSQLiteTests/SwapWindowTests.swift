@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Testing
import TestSupport

/// The background rotation's swap closes the database's writer, proves with a lease that nobody
/// else has the file open, and renames the copy over it. Another process that opens the file,
/// commits and closes again between the close and the lease leaves no descriptor for the lease to
/// see, so the swap must find its commit some other way. Driven by the pausing test VFS: the swap
/// is stopped right after the writer's file is closed, and another connection writes there; then
/// the whole open and background rotation is stopped at each of its file operations in turn.
@Suite("The background swap and a commit made beside it", .serialized)
struct SwapWindowTests {
    @Test("a commit made by another connection between the writer's close and the lease is not lost", arguments: [false, true])
    func commitBeforeTheLease(walMode: Bool) async throws {
        let directory = TemporaryDirectory("swap-window")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try BackgroundRotationTests.makeFile(at: path, ring: ring, walMode: walMode, blobs: 50)
        let keys = try ring.keyList(database: path)
        let watch = VFSWatch(folder: directory.path)
        defer { watch.stop() }
        // The first close of the database file itself (not the copy's) by the library's own
        // threads: the open below runs under a name, so that its closes do not count.
        let closed = watch.pause { $0.actor == nil && $0.operation == .close && $0.after && $0.kind == .database && $0.path == path }

        var options = OpenOptions(concurrentReaders: 0)
        options.backgroundRotation = true
        VFSWatch.setActor("opener")
        let database = try EncryptedDatabase(path: path, keys: keys, options: options)
        // On every exit path, before the database goes: a close that arrives after a failure
        // above would otherwise wait forever for a release this thread never makes.
        defer { closed.release() }
        VFSWatch.setActor(nil)
        let rotation = try #require(database.backgroundRotation)
        let stoppedAt = try #require(closed.waitUntilReached(), "the swap never closed the database file")
        // Another process's commit, made while the swap is stopped after the close.
        VFSWatch.setActor("other")
        var committed = false
        var refusal = "none"
        do {
            let other = try Connection(path: path, access: .readWrite, key: keys.keys[0].cipherKey, busyTimeout: .zero)
            defer { other.close() }
            try other.execute("INSERT INTO ledger(writer, body) VALUES (77, 'made beside the swap')")
            committed = true
        } catch {
            refusal = "\(error)"
        }
        VFSWatch.setActor(nil)
        closed.release()
        let report = try await rotation.result()
        print("swap-window|\(walMode ? "wal" : "delete")|stopped at \(stoppedAt)|other committed \(committed) (\(refusal))|method \(report.method)|fallback \(report.fallbackReason ?? "none")")

        let rows = try await database.read { try $0.queryValue("SELECT count(*) FROM ledger WHERE writer = 77", as: Int.self) }
        let shell = try SQLCipherShell.run(path, key: ring.keys[1].shellKey, "SELECT count(*) FROM ledger WHERE writer = 77;")
        // Either the commit was refused (the swap keeps every connection from starting a
        // transaction until its lease), or it is in the database. Before the gate it was made
        // and lost, in both journal modes.
        if committed {
            #expect(rows == 1, "the commit made beside the swap is missing from the database (\(report.method), fallback: \(report.fallbackReason ?? "none"))")
            #expect(shell.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "the sqlcipher shell with the new key: \(shell.stdout) \(shell.stderr)")
        } else {
            #expect(refusal.contains("busy") || refusal.contains("locked"), "the other connection failed for another reason: \(refusal)")
            #expect(rows == 0)
        }
    }

    @Test("a background rotation stopped at each lock, unlock, shm lock, open, close, sync, truncate, delete, read and write of the database file, from the open to the swap, while another connection commits a row: every commit is in the rotated file", arguments: [false, true])
    func everyPausePoint(walMode: Bool) async throws {
        // Blobs of 4,000 bytes; PAUSE_POINT_ROWS (comma-separated) for stress runs at other sizes.
        for blobs in PausePointSizes.rows(default: 50) {
            // The rounds run on a thread of their own: each waits for a task (the rotation's
            // result). Run on a thread of the cooperative pool, which has one thread per core,
            // the two cases of this test blocked both on a 2-core machine, so no task of the
            // process could run again: their rounds, and every async test, hung.
            let summary = try await OwnThread.run { try Self.everyPausePoint(walMode: walMode, blobs: blobs) }
            print("swap-points|\(walMode ? "wal" : "delete"), \(blobs) blobs|pause points \(summary.points)|other committed \(summary.committed)|refused \(summary.refused)|\(summary.methods.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))|problems \(summary.problems.count)")
            for line in summary.problems.prefix(4) { print("problem: \(line)") }
            #expect(summary.points > 10, "the VFS saw only \(summary.points) pause points")
            #expect(summary.committed > 0 && summary.refused > 0, "the other connection should get in at some points and be kept out at others")
            #expect(summary.problems.isEmpty, "\(summary.problems.count) problems; first: \(summary.problems.first ?? "")")
        }
    }

    /// What the rounds of ``everyPausePoint(walMode:blobs:)`` found.
    private struct PausePointSummary: Sendable {
        var points = 0, committed = 0, refused = 0
        var methods: [String: Int] = [:]
        var problems: [String] = []
    }

    private static func everyPausePoint(walMode: Bool, blobs: Int) throws -> PausePointSummary {
        let directory = TemporaryDirectory("swap-points")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite"), template = directory.file("template.sqlite")
        try BackgroundRotationTests.makeFile(at: template, ring: ring, walMode: walMode, blobs: blobs)
        let keys = try ring.keyList(database: path)
        let watch = VFSWatch(folder: directory.path)
        defer { watch.stop() }
        var options = OpenOptions(concurrentReaders: 0)
        options.backgroundRotation = true
        let counted: Set<VFSEvent.Operation> = [.lock, .unlock, .shmLock, .open, .close, .sync, .truncate, .delete, .read, .write]
        let files: Set<String> = [path, path + "-journal", path + "-wal"]
        var problems: [String] = [], committed = 0, refused = 0, methods: [String: Int] = [:]
        // The work runs on an unnamed thread, so that the rotation's own threads count too.
        let rounds = try watch.everyPausePoint(actor: nil, counting: { $0.after && files.contains($0.path) && counted.contains($0.operation) }, prepare: {
            for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            try TestFiles.copy(template, to: path)
            if FileManager.default.fileExists(atPath: template + "-wal") { try TestFiles.copy(template + "-wal", to: path + "-wal") }
            return { () -> String in
                do {
                    let database = try EncryptedDatabase(path: path, keys: keys, options: options)
                    guard let rotation = database.backgroundRotation else { return "no background rotation" }
                    let report = try BlockingWait.result { try await rotation.result() }
                    return "\(report.method)\(report.fallbackReason.map { " (fell back: \($0))" } ?? "")"
                } catch {
                    return "failed: \(error)"
                }
            }
        }, meanwhile: { _ -> Int64? in
            // Another process's commit, on whichever key the file is on now.
            VFSWatch.setActor("other")
            defer { VFSWatch.setActor(nil) }
            for key in keys.keys.map(\.cipherKey) {
                guard let other = try? Connection(path: path, access: .readWrite, key: key, busyTimeout: .zero) else { continue }
                defer { other.close() }
                guard (try? other.queryValue("SELECT count(*) FROM sqlite_master", as: Int.self)) != nil else { continue }
                guard (try? other.execute("INSERT INTO ledger(writer, body) VALUES (77, 'made beside the rotation')")) != nil else { return nil }
                // Then it moves its frames into the database file and empties the -wal, as a
                // program that checkpoints by itself does: no frame is left to tell of the commit.
                if walMode { _ = try? other.query("PRAGMA wal_checkpoint(TRUNCATE)") }
                return other.lastInsertRowID
            }
            return nil
        }, inspect: { round in
            methods[round.outcome.hasPrefix("failed") ? "failed" : String(round.outcome.prefix { $0 != " " }), default: 0] += 1
            if round.outcome.hasPrefix("failed") || round.outcome.hasPrefix("no ") { problems.append("pause point \(round.point), \(round.event): \(round.outcome)") }
            if round.meanwhile == nil { refused += 1 } else { committed += 1 }
            VFSWatch.setActor("check")
            defer { VFSWatch.setActor(nil) }
            let check = try? EncryptedDatabase.check(path: path, keys: keys)
            let (rows, integrity) = (try? EncryptedDatabase(path: path, keys: keys).read { db in
                (try db.queryValue("SELECT count(*) FROM ledger WHERE writer = 77", as: Int.self), try db.queryValue("PRAGMA integrity_check", as: String.self))
            }) ?? (nil, nil)
            let expected = round.meanwhile == nil ? 0 : 1
            if check?.openedWithKeyID != keys.currentID || rows != expected || integrity != "ok" {
                problems.append("pause point \(round.point), \(round.event): rotation \(round.outcome); file on \(check?.openedWithKeyID ?? "no key"), commits \(rows ?? -1) of \(expected), integrity \(integrity ?? "none")")
            }
        })
        return PausePointSummary(points: rounds.count, committed: committed, refused: refused, methods: methods, problems: problems)
    }
}

/// Runs async work to its end from a synchronous thread (a pause-point round's work).
enum BlockingWait {
    static func result<Value: Sendable>(_ body: @escaping @Sendable () async throws -> Value) throws -> Value {
        let outcome = SetOnce<Result<Value, any Error>>()
        Task {
            do { outcome.set(.success(try await body())) } catch { outcome.set(.failure(error)) }
        }
        guard let result = outcome.wait(limit: .seconds(600)) else { throw HangError() }
        return try result.get()
    }

    struct HangError: Error, CustomStringConvertible {
        var description: String { "the work did not finish within 600 s" }
    }
}
