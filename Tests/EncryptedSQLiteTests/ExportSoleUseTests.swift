@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Testing
import TestSupport

/// The export path (encrypting a plaintext file, upgrading a legacy file, changing cipher
/// settings) renames a new file over the database. Another connection that still has the old file
/// open would go on reading it and fail every write (SQLite's 1032, "database moved"), so the
/// rename happens only once nobody else has the file open (``SoleUse``): otherwise the rotation
/// refuses with a busy error and changes nothing.
@Suite("The export path and other connections", .serialized, .ownThread)
struct ExportSoleUseTests {
    static let rowCount = 30

    /// A plaintext file with `rowCount` rows in `t`, in rollback-journal mode.
    static func makePlaintext(at path: String) throws {
        try PausePointFile.make(at: path, key: nil, rows: rowCount).close()
    }

    @Test("another connection of this process has the plaintext file open: the export refuses with busy, the file stays as it was and the other connection goes on writing to it")
    func holderInThisProcess() throws {
        let directory = TemporaryDirectory("export-holder")
        let ring = TestKeyring([.hex], in: directory, plaintextID: "v0")
        let path = directory.file("app.sqlite")
        try Self.makePlaintext(at: path)
        let holder = try Connection(path: path, access: .readWrite, key: nil, busyTimeout: .seconds(5))
        defer { holder.close() }
        #expect(try holder.queryValue("SELECT count(*) FROM t", as: Int.self) == Self.rowCount)
        let before = FileSnapshot(path)

        var options = OpenOptions()
        options.busyTimeout = .milliseconds(200)
        let error = #expect(throws: EncryptedDatabaseError.self) {
            try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: options)
        }
        guard case .busy(_, let detail)? = error else {
            Issue.record("expected a busy error, got \(String(describing: error))")
            return
        }
        #expect(detail.contains("another connection"), "\(detail)")
        #expect(detail.contains("Nothing was changed"), "\(detail)")
        #expect(FileSnapshot(path) == before, "the file changed")
        // The holder's locks and file are intact: it writes, and the write is in the file at the path.
        try holder.execute("INSERT INTO t(payload) VALUES (x'01')")
        let fresh = try Connection(path: path, access: .readOnly, key: nil, busyTimeout: .seconds(5))
        defer { fresh.close() }
        #expect(try fresh.queryValue("SELECT count(*) FROM t", as: Int.self) == Self.rowCount + 1)
    }

    @Test("the export stopped at each lock, unlock, open, close, sync, delete, read and write on the database file while another connection tries to write: every write it made is in the encrypted file")
    func everyPausePoint() throws {
        for rowCount in PausePointSizes.rows(default: Self.rowCount) { try everyPausePoint(rowCount: rowCount) }
    }

    private func everyPausePoint(rowCount: Int) throws {
        let scene = try PausePointScene("export-points", kinds: [.hex], plaintextID: "v0")
        defer { scene.watch.stop() }
        let (path, keys, watch) = (scene.path, scene.keys, scene.watch)
        let operations: Set<VFSEvent.Operation> = [.lock, .unlock, .open, .close, .sync, .delete, .truncate, .read, .write]
        var lost: [String] = [], written = 0, refused = 0, failedOpens: [String] = []
        let rounds = try watch.everyPausePoint(actor: "rotator", counting: { $0.after && $0.path == path && operations.contains($0.operation) }, prepare: {
            try PausePointFile.make(at: path, key: nil, rows: rowCount).close()
            return { () -> String in
                do {
                    let database = try EncryptedDatabase(path: path, keys: keys)
                    guard let rotation = database.report.rotation else { return "not rotated" }
                    return "\(rotation.method)"
                } catch {
                    return "failed: \(error)"
                }
            }
        }, meanwhile: { _ -> Int64? in
            // Another process's write to the plaintext file, made while the export is stopped.
            guard let other = try? Connection(path: path, access: .readWrite, key: nil, busyTimeout: .zero) else { return nil }
            defer { other.close() }
            guard (try? other.execute("INSERT INTO t(payload) VALUES (x'77')")) != nil else { return nil }
            return other.lastInsertRowID
        }, inspect: { round in
            if round.outcome.hasPrefix("failed") { failedOpens.append("\(round.point) \(round.event): \(round.outcome)") }
            guard let row = round.meanwhile else {
                refused += 1
                return
            }
            written += 1
            // The write must be in the database, whichever key it is on now.
            let database = try EncryptedDatabase(path: path, keys: keys)
            let found = try database.read { try $0.queryValue("SELECT count(*) FROM t WHERE id = ?", [row], as: Int.self) }
            if found != 1 { lost.append("pause point \(round.point), \(round.event): row \(row) missing (\(round.outcome))") }
        })
        print("export-points|\(rowCount) rows|pause points \(rounds.count)|other wrote \(written)|refused \(refused)|lost \(lost.count)|failed opens \(failedOpens.count)")
        for line in lost.prefix(3) { print("lost: \(line)") }
        #expect(rounds.count > 10, "the VFS saw only \(rounds.count) pause points")
        #expect(written > 0 && refused > 0, "the other connection should get in at some points and be kept out at others")
        #expect(lost.isEmpty, "\(lost.count) writes lost; first: \(lost.first ?? "")")
        #expect(failedOpens.isEmpty, "\(failedOpens.count) opens failed; first: \(failedOpens.first ?? "")")
    }
}
