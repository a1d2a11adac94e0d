@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Testing
import TestSupport

/// The engine's rekey holds the database's lock from the moment it has made sure nobody else
/// uses the file until its rekey has committed. Before, it took the lock to probe (`BEGIN
/// EXCLUSIVE; COMMIT`), released it, and `sqlite3_rekey` took it again: another connection that
/// got in between with a read or write transaction made SQLCipher 3.4.1's rekey do nothing while
/// reporting success (`rotationNotApplied` when it outlasted the busy timeout).
///
/// Driven by the pausing test VFS: the rotation is stopped after each of its file operations in
/// turn, and another connection tries to start a write transaction there.
@Suite("The engine's rekey holds its lock throughout", .serialized)
struct EngineRekeyLockTests {
    static let rowCount = 60

    struct Point: CustomStringConvertible {
        let point: Int
        let event: VFSEvent
        let otherGotIn: Bool
        let rotated: String
        var description: String { "pause point \(point), stopped at \(event): other \(otherGotIn ? "got in" : "kept out"), rotation \(rotated)" }
    }

    static func everyPausePoint(journalMode: String) throws -> [Point] {
        let scene = try PausePointScene("engine-rekey-lock")
        defer { scene.watch.stop() }
        let (path, watch) = (scene.path, scene.watch)
        let (old, new) = (scene.keys.keys[0], scene.keys.keys[1])
        var points: [Point] = []
        _ = try watch.everyPausePoint(actor: "rotator", prepare: {
            try PausePointFile.make(at: path, key: old.cipherKey, journalMode: journalMode, rows: Self.rowCount).close()
            let rotating = try #require(try KeyedConnections(path: path, access: .readWrite, busyTimeout: .seconds(5)).open(with: old))
            let context = RotationContext(path: path, from: old, to: new, busyTimeout: .seconds(5), verification: .schema,
                                          logger: OpenOptions().logger, files: .system, workers: 1)
            return {
                do {
                    switch try EngineRekey().rotate(rotating, in: context) {
                    case .rotated(let connection, _):
                        connection.close()
                        return "rotated"
                    case .declined(let connection, let reason):
                        connection.close()
                        return "declined: \(reason)"
                    }
                } catch {
                    return "failed: \(error)"
                }
            }
        }, meanwhile: { _ in
            // Another process's write transaction, started and ended while the rotation is stopped.
            guard let other = try? Connection(path: path, access: .readWrite, key: old.cipherKey, busyTimeout: .zero) else { return false }
            defer { other.close() }
            guard (try? other.execute("BEGIN IMMEDIATE")) != nil else { return false }
            let read = (try? other.queryValue("SELECT count(*) FROM t", as: Int.self)) != nil
            try? other.execute("ROLLBACK")
            return read
        }, inspect: { round in
            points.append(Point(point: round.point, event: round.event, otherGotIn: round.meanwhile, rotated: round.outcome))
            // Each round must end on the new key with every row, whatever happened meanwhile.
            let check = try Connection(path: path, access: .readOnly, key: new.cipherKey, busyTimeout: .seconds(5))
            defer { check.close() }
            #expect(try check.queryValue("SELECT count(*) FROM t", as: Int.self) == Self.rowCount, "\(round.point): rows")
        })
        return points
    }

    @Test("stopped after each of its file operations, the rotation keeps another connection's write transaction out from its lock until its rekey committed",
          arguments: ["delete", "wal"])
    func lockHeldThroughout(journalMode: String) throws {
        let points = try Self.everyPausePoint(journalMode: journalMode)
        let failed = points.filter { $0.rotated != "rotated" }
        // The window: from the rotation's first lock that excludes writers to its last write.
        let firstLock = points.firstIndex { $0.event.actor == "rotator" && ($0.event.isLockTaken(FileLockLevel.exclusive) || $0.event.isWriteLockOfWAL) }
        let lastWrite = points.lastIndex { $0.event.operation == .write && $0.event.kind != .other }
        let window = (firstLock ?? 0)...(lastWrite ?? 0)
        let inside = points[window]
        let gotIn = inside.filter(\.otherGotIn)
        print("engine-rekey-lock|\(journalMode)|pause points \(points.count)|window \(window)|other got in inside \(gotIn.count)|outside \(points.filter(\.otherGotIn).count - gotIn.count)|rotation failed \(failed.count)")
        for point in gotIn.prefix(3) { print("got in: \(point)") }
        #expect(firstLock != nil && lastWrite != nil && inside.count > 10, "the VFS did not see the rotation's lock and writes")
        // Outside the window the other connection does get in: the check below can fail.
        #expect(points.contains { $0.otherGotIn }, "the other connection never got in anywhere")
        #expect(gotIn.isEmpty, "another connection started a write transaction at \(gotIn.count) pause points inside the rotation's lock; first: \(gotIn.first.map(String.init(describing:)) ?? "")")
        #expect(failed.isEmpty, "\(failed.count) rounds did not rotate; first: \(failed.first.map(String.init(describing:)) ?? "")")
    }
}

extension VFSEvent {
    /// WAL mode's write lock (shm slot 0, exclusive) taken, reported after it succeeded.
    var isWriteLockOfWAL: Bool {
        // SQLITE_SHM_LOCK (2) | SQLITE_SHM_EXCLUSIVE (8); slot 0 is WAL_WRITE_LOCK.
        after && result == 0 && operation == .shmLock && offset == 0 && level == 2 | 8
    }
}
