import DurableFiles
@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Testing
import TestSupport

/// A rotation that replaces the file (an export: here, a change of page size) while other
/// databases of the library have it open: they step aside through the lock file
/// (`StepAsideLock`), and serve from the new file afterwards. Two databases in one process take
/// part as two processes would (open file description locks, one descriptor each); the order
/// comes from the databases' own state (`isAsked`), never from a sleep.
@Suite("Databases step aside while another replaces the file", .serialized, .ownThread)
struct StepAsideTests {
    /// A file on `old`, and the keys: `old`, then `new` with twice the engine's page size, so that
    /// rotating to `new` takes an export.
    struct Scene {
        let directory = TemporaryDirectory("step-aside")
        let path: String
        let old: DatabaseKey
        let new: DatabaseKey
        let newHex = TestKeys.hex()
        let oldHex = TestKeys.hex()
        var keys: KeyList { get throws { try KeyList(database: path, keys: [old, new]) } }

        init(walMode: Bool) throws {
            path = directory.file("app.sqlite")
            let pageSize = SQLCipherEngine.linked.defaultGeneration.format.pageSize
            old = DatabaseKey(id: "old", source: .hex(oldHex))
            new = DatabaseKey(id: "new", source: .hex(newHex), cipher: CipherSettings(pageSize: 2 * pageSize))
            let database = try EncryptedDatabase(path: path, keys: KeyList(database: path, keys: [old]), options: OpenOptions(createIfMissing: true))
            try database.writeWithoutTransaction { db in
                _ = try db.queryValue("PRAGMA journal_mode = \(walMode ? "WAL" : "DELETE")", as: String.self)
                try db.execute("CREATE TABLE ledger(id INTEGER PRIMARY KEY, body TEXT)")
                try db.execute("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 500) INSERT INTO ledger(body) SELECT hex(randomblob(100)) FROM n")
            }
        }

        /// A database that stays on the key the file is on (it can follow: it has both keys).
        func service(readers: Int) throws -> EncryptedDatabase {
            var options = OpenOptions(concurrentReaders: readers)
            options.rotateToCurrentKey = false
            return try EncryptedDatabase(path: path, keys: keys, options: options)
        }

        /// The file as a user would check it: which of the two keys opens it, and its rows.
        func check() throws -> (key: String, rows: Int) {
            let key = try EncryptedDatabase.check(path: path, keys: keys).openedWithKeyID
            let rows = try EncryptedDatabase(path: path, keys: KeyList(database: path, keys: [new]), options: OpenOptions(rotateToCurrentKey: false))
                .read { try $0.queryValue("SELECT count(*) FROM ledger", as: Int.self) ?? -1 }
            return (key, rows)
        }
    }

    /// Blocks until `database` is asked to step aside (another database announced an export).
    static func waitUntilAsked(_ database: EncryptedDatabase) {
        let guardLimit = ContinuousClock.now + .seconds(600)  // a hang guard only
        while database.follower.stepAside?.isAsked != true, ContinuousClock.now < guardLimit { usleep(500) }
    }

    @Test("a file left in rollback-journal mode by a process that died while replacing it (after leaving WAL mode): the database with readers reopens it in WAL mode, and its readers read beside the writer")
    func reopensInWALMode() throws {
        let scene = try Scene(walMode: true)
        let service = try scene.service(readers: 2)
        #expect(try service.read { try $0.queryValue("SELECT count(*) FROM ledger", as: Int.self) } == 500)
        // Another process announces a replacement: the service steps aside (its watcher), and the
        // announcer takes the file out of WAL mode with the sqlcipher shell, then dies (its lock
        // file's descriptor closes) before any new file is in place.
        do {
            let announcer = try #require(StepAsideLock(databasePath: scene.path, create: false))
            #expect(announcer.announce(within: .seconds(60)) == .clear, "the service did not step aside")
            let left = try SQLCipherShell.run(scene.path, key: .hex(scene.oldHex), "PRAGMA journal_mode = DELETE;")
            #expect(left.status == 0 && left.stdout.contains("delete"), "\(left.stdout) \(left.stderr)")
        }
        #expect(try service.read { try $0.queryValue("SELECT count(*) FROM ledger", as: Int.self) } == 500)
        try service.write { try $0.execute("INSERT INTO ledger(body) VALUES ('after')") }
        let mode = try SQLCipherShell.run(scene.path, key: .hex(scene.oldHex), "PRAGMA journal_mode;")
        #expect(mode.stdout.contains("wal"), "the file stayed in rollback-journal mode: \(mode.stdout) \(mode.stderr)")
        #expect(try service.read { try $0.queryValue("SELECT count(*) FROM ledger", as: Int.self) } == 501)
    }

    @Test("a database whose last reference goes while the watcher checks it closes on the watcher's thread, and databases open afterwards as before")
    func releasedWhileWatched() throws {
        let scene = try Scene(walMode: true)
        let keepsWatcherRunning = try scene.service(readers: 0)
        let target = scene.directory.file("released.sqlite")
        var released: EncryptedDatabase? = try EncryptedDatabase(
            path: target, keys: KeyList(database: target, keys: [scene.old]), options: OpenOptions(createIfMissing: true))
        // The watcher, holding the database, waits until the test has let its own reference go:
        // the watcher's is then the last, and the database's deinit runs on the watcher's thread.
        let holding = DispatchSemaphore(value: 0), letGo = DispatchSemaphore(value: 0)
        let once = Locked(false)
        StepAsideWatcher.checking.withLock {
            $0 = { database in
                guard database.path == target, once.withLock({ done in defer { done = true }; return !done }) else { return }
                holding.signal()
                letGo.wait()
            }
        }
        defer { StepAsideWatcher.checking.withLock { $0 = nil } }
        #expect(holding.wait(timeout: .now() + 60) == .success, "the watcher did not check the database")
        released = nil
        letGo.signal()
        // Opening registers with the watcher. Before the fix the watcher's thread, releasing the
        // last reference inside its lock, waited for that lock in the deinit forever, and so did
        // every database opened after it. On a thread of its own, with a hang guard.
        let opened = DispatchSemaphore(value: 0)
        let another = scene.directory.file("another.sqlite")
        Thread.detachNewThread {
            _ = try? EncryptedDatabase(path: another, keys: KeyList(database: another, keys: [scene.old]), options: OpenOptions(createIfMissing: true))
            opened.signal()
        }
        let didOpen = opened.wait(timeout: .now() + 60) == .success
        #expect(didOpen, "opening a database after the release hung: the watcher is deadlocked")
        guard didOpen else {
            _ = Unmanaged.passRetained(keepsWatcherRunning)  // its deinit would wait for the watcher too
            return
        }
        #expect(released == nil)
        #expect(try keepsWatcherRunning.read { try $0.queryValue("SELECT count(*) FROM ledger", as: Int.self) } == 500)
    }

    @Test("an idle database steps aside while another opens the file and exports it: the export completes, the idle one serves the new file",
          arguments: [(false, 0), (true, 0), (true, 2)])
    func idleDatabase(walMode: Bool, readers: Int) throws {
        let scene = try Scene(walMode: walMode)
        let service = try scene.service(readers: readers)
        #expect(service.report.openedWithKeyID == "old")
        #expect(try service.read { try $0.queryValue("SELECT count(*) FROM ledger", as: Int.self) } == 500)

        let rotator = try EncryptedDatabase(path: scene.path, keys: scene.keys)
        #expect(rotator.report.rotation?.method == .export, "the rotation was \(String(describing: rotator.report.rotation?.method))")

        // The idle database's next read and write run on the new file.
        #expect(try service.read { try $0.queryValue("SELECT count(*) FROM ledger", as: Int.self) } == 500)
        try service.write { try $0.execute("INSERT INTO ledger(body) VALUES ('after the export')") }
        #expect(service.report.currentKeyID == "new")
        let (key, rows) = try scene.check()
        #expect(key == "new")
        #expect(rows == 501, "the idle database's write after the export is not in the new file")
        #expect(throws: EncryptedDatabaseError.self, "the old key still opens the file") {
            try EncryptedDatabase.check(path: scene.path, keys: KeyList(database: scene.path, keys: [scene.old]))
        }
        let shell = try SQLCipherShell.run(scene.path, key: .hex(scene.newHex), "PRAGMA cipher_page_size = \(2 * SQLCipherEngine.linked.defaultGeneration.format.pageSize); PRAGMA quick_check; SELECT count(*) FROM ledger;")
        #expect(shell.stdout.split(separator: "\n").map(String.init) == ["ok", "501"], "the sqlcipher shell: \(shell.stdout) \(shell.stderr)")
    }

    @Test("a database inside a write when the export is announced: the export waits for its commit, and the row is in the new file", arguments: [false, true])
    func writeInProgress(walMode: Bool) throws {
        let scene = try Scene(walMode: walMode)
        let service = try scene.service(readers: 0)
        let exported = DispatchSemaphore(value: 0)
        let outcome = Locked<Result<RotationMethod?, any Error>?>(nil)
        try service.write { db in
            Thread {
                let result = Result { () throws -> RotationMethod? in try EncryptedDatabase(path: scene.path, keys: scene.keys).report.rotation?.method }
                outcome.withLock { $0 = result }
                exported.signal()
            }.start()
            // The export has announced, and waits for this database, which is inside its write.
            Self.waitUntilAsked(service)
            try db.execute("INSERT INTO ledger(body) VALUES ('committed while the export waited')")
        }
        #expect(exported.wait(timeout: .now() + 600) == .success, "the export never ended")
        let result: Result<RotationMethod?, any Error>? = outcome.withLock { $0 }
        let method = try #require(result).get()
        #expect(method == .export)
        let (key, rows) = try scene.check()
        #expect(key == "new")
        #expect(rows == 501, "the commit made while the export waited is not in the new file")
    }

    @Test("a database that does not step aside within the busy timeout (inside a long read): the export refuses with busy and changes nothing")
    func stillInUse() throws {
        let scene = try Scene(walMode: false)
        let service = try scene.service(readers: 0)
        let before = FileSnapshot(scene.path)
        let refusal = Locked<(any Error)?>(nil)
        let refused = DispatchSemaphore(value: 0)
        try service.read { _ in
            Thread {
                do {
                    _ = try EncryptedDatabase(path: scene.path, keys: scene.keys, options: OpenOptions(busyTimeout: .milliseconds(300)))
                } catch {
                    refusal.withLock { $0 = error }
                }
                refused.signal()
            }.start()
            #expect(refused.wait(timeout: .now() + 600) == .success, "the export never ended")
        }
        let refusalSeen: (any Error)? = refusal.withLock { $0 }
        let error = try #require(refusalSeen as? EncryptedDatabaseError, "the export went ahead while another database was reading, or failed otherwise: \(String(describing: refusalSeen))")
        guard case .busy(_, let detail) = error else {
            Issue.record("expected busy, got \(error)")
            return
        }
        #expect(detail.contains("did not step aside"), "\(detail)")
        #expect(detail.contains("Nothing was changed"), "\(detail)")
        #expect(FileSnapshot(scene.path) == before, "the file changed")
        // The refusal let go of everything: the database serves, and the export goes ahead now.
        try service.write { try $0.execute("INSERT INTO ledger(body) VALUES ('after the refusal')") }
        #expect(try EncryptedDatabase(path: scene.path, keys: scene.keys).report.rotation?.method == .export)
        #expect(try scene.check() == ("new", 501))
    }
}
