@testable import EncryptedSQLite
import Foundation
import Testing
import TestSupport

@Suite("Encrypted backups", .ownThread)
struct BackupTests {
    let directory = TemporaryDirectory("backup")

    /// The method the linked engine uses for a same-format backup.
    static var expectedMethod: BackupReport.Method {
        SQLCipherEngine.linked.major == 3 ? .backupAPI : .export
    }

    @Test("a backup is a new file on the current key only, same content, user_version and application_id kept, mode 0600, verified; an existing target is never replaced", arguments: [false, true])
    func backup(walMode: Bool) throws {
        let ring = TestKeyring([.passphrase, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[1].shellKey, rows: 300, walMode: walMode)
        let keys = try ring.keyList(database: path)
        let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(concurrentReaders: walMode ? 2 : 0))
        let digest = try database.read { try Fixture.contentDigest($0) }

        let target = directory.file("app-backup.sqlite")
        let report = try database.backup(to: target)
        #expect(report.keyID == "k2")
        #expect(report.method == Self.expectedMethod)
        #expect(report.userVersion == 42 && report.applicationID == 1_234_567)
        #expect(report.bytes == (try FileManager.default.attributesOfItem(atPath: target)[.size] as? Int64))
        #expect(FileSystemProbe.mode(of: target) == 0o600)
        #expect(try Fixture.digest(of: target, with: try ring.only(1, database: target)) == digest)
        #expect(try SQLCipherShell.opens(target, with: ring.keys[1].shellKey))
        #expect(try !SQLCipherShell.opens(target, with: ring.keys[0].shellKey))
        let header = try #require(FileHandle(forReadingAtPath: target)?.readData(ofLength: 16))
        #expect(header != Data("SQLite format 3\0".utf8), "encrypted, not a plaintext SQLite file")
        #expect(directory.listing().allSatisfy { !$0.hasPrefix(".") }, "no temporary left: \(directory.listing())")

        let before = try Data(contentsOf: URL(fileURLWithPath: target))
        #expect(throws: EncryptedDatabaseError.targetExists(path: target)) { try database.backup(to: target) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == before)
    }

    @Test("a database still on an old key (rotation off) is backed up under the current key; the static form leaves the database as it was")
    func oldKeySource() throws {
        let ring = TestKeyring([.passphrase, .hex], in: directory)
        let path = directory.file("old.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 100)
        let keys = try ring.keyList(database: path)
        let snapshot = FileSnapshot(path)
        let target = directory.file("old-backup.sqlite")
        let report = try EncryptedDatabase.backup(path: path, keys: keys, to: target)
        #expect(report.keyID == "k2")
        #expect(report.method == .export || report.method == Self.expectedMethod)
        #expect(FileSnapshot(path).bytes == snapshot.bytes, "the database itself is not rotated")
        #expect(try Fixture.digest(of: target, with: try ring.only(1, database: target)) == Fixture.digest(of: path, with: try ring.only(0, database: path)))

        let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(rotateToCurrentKey: false))
        let second = directory.file("old-backup-2.sqlite")
        #expect(try database.backup(to: second).keyID == "k2")
        #expect(try SQLCipherShell.opens(second, with: ring.keys[1].shellKey))
    }

    @Test("backups taken while another thread commits are consistent snapshots (rows and running total agree, quick_check ok)", arguments: [false, true])
    func concurrentWrites(walMode: Bool) throws {
        try backupsUnderWrites(walMode: walMode, busyTimeout: .seconds(20), filler: 0)
    }

    /// In rollback-journal mode a copy's read lock and a commit exclude each other. A thread that
    /// commits back to back held the file's PENDING lock nearly all the time, and the backup's
    /// connection could not take its read lock within a 20 s busy timeout (SQLCipher 4.6.1 CI).
    /// The backup holds the writer instead: with a busy timeout far shorter than a copy (10 ms
    /// against a 5 MB file), no write and no backup fails. Without that, both fail at once.
    @Test("in rollback-journal mode this process's writes wait for a backup's copy on the writer, not on the file: a busy timeout shorter than the copy fails neither")
    func rollbackWritesWaitForTheCopy() throws {
        try backupsUnderWrites(walMode: false, busyTimeout: .milliseconds(10), filler: 5000)
    }

    /// The wait the fix above brings, bounded as a rotation's: the order comes from a hook
    /// inside the copy, not from the copy's speed.
    @Test("in rollback-journal mode an async write that comes during a backup's copy waits on the writer: past writerWaitLimit it gives up with writerWaitExpired and writes nothing; once the copy is done it commits")
    func asyncWriteDuringTheCopy() async throws {
        let ring = TestKeyring([.hex], in: directory)
        let path = directory.file("held.sqlite")
        var options = OpenOptions(createIfMissing: true)
        options.writerWaitLimit = .milliseconds(200)
        let database = try EncryptedDatabase(path: path, keys: try ring.keyList(database: path), options: options)
        try await database.write { db in try db.execute("CREATE TABLE t(x INTEGER); INSERT INTO t VALUES (1)") }
        let inCopy = DispatchSemaphore(value: 0), letGo = DispatchSemaphore(value: 0)
        DatabaseBackup.duringCopy.withLock { hooks in
            hooks[path] = {
                inCopy.signal()
                _ = letGo.wait(timeout: .now() + 300)  // a hang guard only
            }
        }
        defer { DatabaseBackup.duringCopy.withLock { $0[path] = nil } }
        let target = directory.file("held-backup.sqlite")
        let backup = OwnThread.started { try database.backup(to: target) }
        let reached = try await OwnThread.run { inCopy.wait(timeout: .now() + 120) == .success }
        try #require(reached, "the backup never reached its copy")
        await #expect(throws: EncryptedDatabaseError.writerWaitExpired(path: database.path, waited: .milliseconds(200))) {
            try await database.write { db in try db.execute("INSERT INTO t VALUES (2)") }
        }
        letGo.signal()
        let report = try await backup.value()
        try await database.write { db in try db.execute("INSERT INTO t VALUES (3)") }
        #expect(try await database.read { db in try db.queryValue("SELECT group_concat(x) FROM t", as: String.self) } == "1,3")
        let copy = try EncryptedDatabase(path: target, keys: try ring.keyList(database: target), options: OpenOptions(rotateToCurrentKey: false))
        #expect(try await copy.read { db in try db.queryValue("SELECT group_concat(x) FROM t", as: String.self) } == "1")
        #expect(report.keyID == ring.keys.last?.id)
    }

    private func backupsUnderWrites(walMode: Bool, busyTimeout: Duration, filler: Int) throws {
        let ring = TestKeyring([.hex], in: directory)
        let path = directory.file("busy.sqlite")
        let keys = try ring.keyList(database: path)
        let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(createIfMissing: true, busyTimeout: busyTimeout))
        try database.writeWithoutTransaction { db in
            if walMode { _ = try db.queryValue("PRAGMA journal_mode = WAL", as: String.self) }
            try db.execute("CREATE TABLE ledger(n INTEGER PRIMARY KEY, payload BLOB); CREATE TABLE total(id INTEGER PRIMARY KEY CHECK (id = 1), rows INTEGER, sum INTEGER); INSERT INTO total VALUES (1, 0, 0); PRAGMA user_version = 7")
            // Pages for the copy to read (kept out of the ledger's checks).
            try db.execute("CREATE TABLE filler(payload BLOB); WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < \(filler)) INSERT INTO filler SELECT randomblob(1000) FROM n WHERE \(filler) > 0")
        }
        let failedWrites = ProgressCounter()
        let stop = LockedFlag()
        let commits = ProgressCounter()
        let writer = Thread {
            var next = 1
            while !stop.isSet {
                do {
                    try database.write { db in
                        try db.execute("INSERT INTO ledger(n, payload) VALUES (?, randomblob(300))", [next])
                        try db.execute("UPDATE total SET rows = rows + 1, sum = sum + ?", [next])
                    }
                    commits.increment()
                } catch {
                    failedWrites.increment()  // not counted: the backups' checks also find the gap
                }
                next += 1
            }
        }
        writer.start()
        defer { stop.set() }
        var rowCounts: [Int] = []
        for index in 0..<4 {
            // The writer has committed 20 more rows since the last backup (a count, not a sleep).
            #expect(commits.wait(untilAtLeast: commits.value + 20), "the writer stopped committing")
            let target = directory.file("busy-\(index).sqlite")
            try database.backup(to: target)
            let copy = try EncryptedDatabase(path: target, keys: try ring.keyList(database: target), options: OpenOptions(rotateToCurrentKey: false))
            let (rows, sum, totalRows, totalSum, check, version) = try copy.read { db in
                (try db.queryValue("SELECT count(*) FROM ledger", as: Int.self) ?? -1,
                 try db.queryValue("SELECT coalesce(sum(n), 0) FROM ledger", as: Int.self) ?? -1,
                 try db.queryValue("SELECT rows FROM total", as: Int.self) ?? -2,
                 try db.queryValue("SELECT sum FROM total", as: Int.self) ?? -2,
                 try db.queryValue("PRAGMA quick_check", as: String.self),
                 try db.userVersion())
            }
            #expect(rows == totalRows && sum == totalSum, "backup \(index) is not one snapshot: \(rows) rows vs \(totalRows)")
            #expect(sum == rows * (rows + 1) / 2, "rows 1…n, none missing")
            #expect(check == "ok" && version == 7)
            rowCounts.append(rows)
        }
        stop.set()
        print("backup under concurrent writes (\(walMode ? "WAL" : "rollback journal"), busy timeout \(busyTimeout)): rows in the backups \(rowCounts), failed writes \(failedWrites.value)")
        #expect(failedWrites.value == 0, "writes failed during the backups")
        #expect(rowCounts.last ?? 0 > rowCounts.first ?? 0, "the writer made progress between backups: \(rowCounts)")
    }

    @Test("no plaintext reaches any file or temporary file while a backup is written (the open-file scanner)")
    func noPlaintext() throws {
        let ring = TestKeyring([.hex], in: directory)
        let path = directory.file("secret.sqlite")
        let keys = try ring.keyList(database: path)
        let marker = "BACKUP-MARKER-\(UUID().uuidString)"
        let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(createIfMissing: true))
        try database.write { db in
            try db.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT, pad BLOB); CREATE INDEX notes_body ON notes(body)")
            try PlaintextOnDiskTests.fill(db, marker: marker)
        }
        let scanner = OpenFileScanner(markers: [marker], folder: directory.path)
        var elapsed: [Int] = []
        for index in 0..<5 {
            let report = try database.backup(to: directory.file("secret-backup-\(index).sqlite"))
            elapsed.append(Int(report.duration.milliseconds))
        }
        let (hits, _, folderFiles, passes) = scanner.stop()
        print("backup plaintext scan: \(passes) passes over 5 backups of \(elapsed) ms; files seen: \(folderFiles.count)")
        #expect(hits.isEmpty, "plaintext found in \(hits)")
        #expect(passes >= 5 && folderFiles.contains { $0.contains(".rekey-backup") }, "the scanner saw the backups' temporaries (\(passes) passes, \(folderFiles.sorted()))")
        #expect(PlaintextOnDiskTests.filesWithMarker(marker, in: directory.listing().map(directory.file)).isEmpty)
    }
}

/// A flag set once, read from another thread.
final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}
