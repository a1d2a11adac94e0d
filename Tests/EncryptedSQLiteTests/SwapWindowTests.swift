@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Testing
import TestSupport

/// The background rotation's swap closes the database's writer, proves with a lease that nobody
/// else has the file open, and renames the copy over it. Another process that opens the file,
/// commits and closes again between the close and the lease leaves no descriptor for the lease to
/// see, so the swap must find its commit some other way. Driven by the pausing test VFS: the swap
/// is stopped right after the writer's file is closed, and another connection writes there.
@Suite("The background swap and a commit made just before it", .serialized)
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
}
