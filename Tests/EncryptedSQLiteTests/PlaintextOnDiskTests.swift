import CSQLCipher
import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// Watches every file this process has open (`/proc/self/fd`) from a thread of its own while the
/// work runs, reading temporary files (SQLite unlinks them right after opening, so they are only
/// reachable through the descriptor) and the files of one folder, and records where a marker is
/// found.
final class OpenFileScanner: @unchecked Sendable {
    private let markers: [Data]
    private let folder: String
    private let lock = NSCondition()
    // Invariant: the fields below are only touched with `lock` held; `passes` changes broadcast.
    private var running = true
    private var hits: Set<String> = []
    private var temporaryFiles: Set<String> = []
    private var folderFiles: Set<String> = []
    private var passes = 0
    private let done = DispatchSemaphore(value: 0)

    init(markers: [String], folder: String) {
        self.markers = markers.map { Data($0.utf8) }
        self.folder = folder
        Thread { [self] in
            var pass = 0
            while lock.withLock({ running }) {
                scan(includeFolderFiles: pass % 25 == 0)
                pass += 1
                usleep(1000)  // paces the scans; not an order (tests wait for passes, waitForPasses)
            }
            scan(includeFolderFiles: true)
            done.signal()
        }.start()
    }

    private func scan(includeFolderFiles: Bool) {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        var found: [String] = []
        var temporary: [String] = []
        var inFolder: [String] = []
        for descriptor in descriptors {
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)"),
                  target.hasPrefix("/") else { continue }
            let name = URL(fileURLWithPath: target.replacingOccurrences(of: " (deleted)", with: "")).lastPathComponent
            let isTemporary = target.hasSuffix(" (deleted)") || name.hasPrefix("etilqs_") || name.hasPrefix("sqlite_")
            let isOurs = target.hasPrefix(folder + "/")
            guard isTemporary || (isOurs && includeFolderFiles) else { continue }
            if isTemporary { temporary.append(target) } else { inFolder.append(target) }
            if let content = read("/proc/self/fd/\(descriptor)"), markers.contains(where: { content.range(of: $0) != nil }) {
                found.append(target)
            }
        }
        lock.withLock {
            passes += 1
            lock.broadcast()
            hits.formUnion(found)
            temporaryFiles.formUnion(temporary)
            folderFiles.formUnion(inFolder)
        }
    }

    private func read(_ path: String) -> Data? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, status.st_size < 512 << 20 else { return nil }
        var data = Data(count: Int(status.st_size))
        let count = data.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        return count > 0 ? data.prefix(count) : nil
    }

    /// Blocks until the scanner has made `count` more passes from now (the first may have begun
    /// before the call; the second began after it). `false` after `limit`, a hang guard.
    @discardableResult
    func waitForPasses(_ count: Int = 2, limit: Duration = .seconds(60)) -> Bool {
        let deadline = Date().addingTimeInterval(limit.seconds)
        return lock.withLock {
            let target = passes + count
            while passes < target {
                if !lock.wait(until: deadline) { return passes >= target }
            }
            return true
        }
    }

    /// Stops; returns the files a marker was found in, the temporary and folder files seen, and the passes made.
    func stop() -> (hits: Set<String>, temporaryFiles: Set<String>, folderFiles: Set<String>, passes: Int) {
        lock.withLock { running = false }
        done.wait()
        return lock.withLock { (hits, temporaryFiles, folderFiles, passes) }
    }
}

/// Reads a file by name, if it exists.
private func fileContent(_ path: String) -> Data? { TestFiles.contents(path) }

@Suite("No plaintext on disk")
struct PlaintextOnDiskTests {
    static let rows = 12_000

    /// `rows` rows of marker text (~4.5 MB, more than the page cache, so that the transaction spills).
    static func fill(_ db: Connection, marker: String, table: String = "notes") throws {
        let insert = try db.prepare("INSERT INTO \(table)(body, pad) VALUES (?, randomblob(60))")
        for index in 0..<rows {
            try insert.execute(["\(marker) row \(index) " + String(repeating: "plaintext ", count: 30)])
        }
    }

    /// The marker's occurrences in the files of `paths` that exist.
    static func filesWithMarker(_ marker: String, in paths: [String]) -> [String] {
        paths.filter { path in fileContent(path).map { $0.contains(bytes: marker.utf8) } ?? false }
    }

    @Test("marker rows written in DELETE and WAL mode, with spilling transactions, big sorts, temp tables, indexes and VACUUM: no marker in the database, -journal, -wal, -shm or any temporary file")
    func noPlaintext() throws {
        let directory = TemporaryDirectory("plaintext")
        let marker = "PLAINTEXT-MARKER-\(UUID().uuidString)"
        let tempMarker = "TEMP-TABLE-MARKER-\(UUID().uuidString)"
        let scanner = OpenFileScanner(markers: [marker, tempMarker], folder: directory.path)
        var checked: [String: Int] = [:]

        // DELETE mode.
        let path = directory.file("delete.sqlite")
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "k", source: .hex(TestKeys.hex()))])
        let sides = { (path: String) in [path, path + "-journal", path + "-wal", path + "-shm"] }
        do {
            let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(createIfMissing: true))
            try database.write { db in
                try db.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT, pad BLOB)")
                try Self.fill(db, marker: marker)
                // The transaction is open and has spilled pages into the file: check it now.
                #expect(fileContent(path + "-journal") != nil, "no journal during the write transaction")
                // The scanner reads the open files while the transaction's pages are spilled.
                #expect(scanner.waitForPasses(), "the scanner made no pass during the DELETE transaction")
                #expect(Self.filesWithMarker(marker, in: sides(path)).isEmpty)
                checked["open transaction (DELETE)"] = sides(path).filter { FileManager.default.fileExists(atPath: $0) }.count
            }
            try database.write { db in
                try db.execute("UPDATE notes SET body = body || ' updated' WHERE id % 3 = 0")
                #expect(Self.filesWithMarker(marker, in: sides(path)).isEmpty, "marker in the journal of an update")
            }
            _ = try database.read { db in
                _ = try db.query("SELECT body FROM notes ORDER BY body DESC LIMIT 3")
                _ = try db.query("SELECT DISTINCT substr(body, 1, 60) AS b FROM notes ORDER BY b LIMIT 3")
                _ = try db.query("SELECT length(body) AS l, count(*) FROM notes GROUP BY l ORDER BY l")
            }
            try database.write { db in
                try db.execute("CREATE TEMP TABLE scratch(id INTEGER PRIMARY KEY, body TEXT, pad BLOB)")
                try Self.fill(db, marker: tempMarker, table: "scratch")
                try db.execute("CREATE INDEX temp.scratch_body ON scratch(body)")
                _ = try db.query("SELECT body FROM scratch ORDER BY pad LIMIT 3")
                try db.execute("CREATE INDEX notes_body ON notes(body)")
            }
            try database.writeWithoutTransaction { db in try db.execute("VACUUM") }
        }

        // WAL mode, with a reader pool; frames checked before any checkpoint.
        let wal = directory.file("wal.sqlite")
        let walKeys = try KeyList(database: wal, keys: [DatabaseKey(id: "k", source: .passphrase(TestKeys.passphrase("wal")))])
        do {
            let database = try EncryptedDatabase(path: wal, keys: walKeys, options: OpenOptions(createIfMissing: true, concurrentReaders: 2))
            try database.writeWithoutTransaction { db in _ = try db.queryValue("PRAGMA wal_autocheckpoint = 0", as: Int.self) }
            try database.write { db in
                try db.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT, pad BLOB)")
                try Self.fill(db, marker: marker)
                #expect(Self.filesWithMarker(marker, in: sides(wal)).isEmpty, "marker in a WAL file during the transaction")
                #expect(scanner.waitForPasses(), "the scanner made no pass during the WAL transaction")
                checked["open transaction (WAL)"] = sides(wal).filter { FileManager.default.fileExists(atPath: $0) }.count
            }
            #expect(fileContent(wal + "-wal").map { $0.count > 1_000_000 } == true, "the frames should still be in the WAL")
            #expect(Self.filesWithMarker(marker, in: sides(wal)).isEmpty, "marker in the WAL before the checkpoint")
            #expect(scanner.waitForPasses(), "the scanner made no pass before the checkpoint")
            for _ in 0..<2 {
                _ = try database.read { db in try db.query("SELECT body FROM notes ORDER BY body DESC LIMIT 3") }
            }
            try database.write { db in
                try db.execute("CREATE TEMP TABLE scratch AS SELECT * FROM notes")
                try db.execute("CREATE INDEX notes_body ON notes(body)")
            }
            try database.writeWithoutTransaction { db in _ = try db.query("PRAGMA wal_checkpoint(TRUNCATE)") }
        }
        let (hits, temporaryFiles, folderFiles, passes) = scanner.stop()
        #expect(hits.isEmpty, "markers found in open files: \(hits)")
        #expect(Self.filesWithMarker(marker, in: sides(path) + sides(wal)).isEmpty)
        #expect(Self.filesWithMarker(tempMarker, in: sides(path) + sides(wal)).isEmpty)
        // At least the passes waited for above (a count of passes, not of time: a loaded machine
        // makes fewer; 50 once failed beside CPU burners).
        #expect(passes >= 6 && folderFiles.contains(path), "the scanner made \(passes) passes and saw \(folderFiles.count) files of the folder")
        print("plaintext: \(passes) scans of /proc/self/fd, \(folderFiles.count) database and side files and \(temporaryFiles.count) temporary files seen (\(temporaryFiles.sorted())), side files present during open transactions: \(checked); markers found: \(hits.count)")
    }

    @Test("control: with temp_store = FILE on a raw SQLCipher handle (what the authorizer prevents), the scanner finds the plaintext in a temporary file")
    func scannerFindsTemporaryPlaintext() throws {
        let directory = TemporaryDirectory("plaintext-control")
        let marker = "CONTROL-MARKER-\(UUID().uuidString)"
        let scanner = OpenFileScanner(markers: [marker], folder: directory.path)
        var handle: OpaquePointer?
        #expect(sqlite3_open_v2(directory.file("control.sqlite"), &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK)
        defer { sqlite3_close_v2(handle) }
        _ = sqlite3_key(handle, "control key", 11)
        // A small cache for the temporary schema, so that the temp table spills to its file on
        // every engine (SQLCipher 4's 4 KiB pages give SQLite's default cache 8 MB).
        let sql = """
            PRAGMA temp_store = FILE;
            PRAGMA temp.cache_size = 16;
            CREATE TABLE notes(body TEXT);
            WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 3000)
            INSERT INTO notes SELECT '\(marker) ' || x || ' ' || hex(randomblob(200)) FROM n;
            CREATE TEMP TABLE copy AS SELECT * FROM notes;
            """
        #expect(sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK)
        // The temp table's file stays open until the handle closes: the scanner looks at it.
        #expect(scanner.waitForPasses(), "the scanner made no pass")
        let (hits, temporaryFiles, _, _) = scanner.stop()
        #expect(!temporaryFiles.isEmpty, "no temporary file was seen")
        #expect(hits.contains { $0.hasSuffix(" (deleted)") }, "the scanner did not find the plaintext temp table: the scan proves nothing")
    }

    @Test("temp_store = FILE / 1 / 0, temp_store_directory and their spellings are refused on the writer, in transactions, in migrations and on pooled readers")
    func tempStoreRefusedEverywhere() throws {
        let directory = TemporaryDirectory("temp-store")
        let path = directory.file("db.sqlite")
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "k", source: .hex(TestKeys.hex()))])
        let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(createIfMissing: true, concurrentReaders: 3))
        try database.write { db in try db.execute("CREATE TABLE t(a); INSERT INTO t VALUES (1)") }
        let refused = ["PRAGMA temp_store = FILE", "PRAGMA temp_store = 1", "PRAGMA temp_store = 0", "PRAGMA temp_store = DEFAULT",
                       "pragma TEMP_STORE = 'file'", "PRAGMA temp_store = \"1\"", "PRAGMA main.temp_store = 1", "PRAGMA temp.temp_store = FILE",
                       "PRAGMA temp_store_directory = '/tmp'", "PRAGMA temp_store_directory"]
        let check: @Sendable (Connection, String) -> Void = { db, place in
            for sql in refused {
                do {
                    try db.execute(sql)
                    Issue.record("\(sql) was allowed \(place)")
                } catch let error as SQLiteError {
                    #expect(error.code.primary == .notAuthorized, "\(sql) \(place): \(error)")
                } catch {
                    Issue.record("\(sql) \(place): \(error)")
                }
                #expect((try? db.queryValue("PRAGMA temp_store", as: Int.self)) == 2, "temp_store changed \(place)")
            }
        }
        try database.writeWithoutTransaction { db in check(db, "on the writer") }
        try database.write { db in check(db, "in a write transaction") }
        // Pooled readers: 3 reads inside their closures at once, so that each of the pool's 3
        // reader connections is open and checked (the order comes from the reads, not a sleep).
        _ = try PooledReads.holdAtOnce(database, count: 3) { db in check(db, "on a pooled reader") }
        // A migration that tries it fails and changes nothing.
        var migrator = DatabaseMigrator()
        try migrator.registerSQLMigration("0001_temp", sql: "CREATE TABLE u(a);\nPRAGMA temp_store = FILE;")
        let error = #expect(throws: MigrationError.self) { try database.writeWithoutTransaction { db in try migrator.migrate(db) } }
        if case .migrationFailed(_, _, let reason)? = error { #expect(reason.contains("not authorized")) }
        #expect(try database.read { db in try db.queryValue("SELECT count(*) FROM sqlite_master WHERE name = 'u'", as: Int.self) } == 0)
        // MEMORY stays allowed.
        try database.writeWithoutTransaction { db in try db.execute("PRAGMA temp_store = MEMORY; PRAGMA temp_store = 2") }
    }
}
