@testable import EncryptedSQLite
import DurableFiles
@testable import KeyConfiguration
import Foundation
import Testing
import TestSupport

/// A database opened on an older key with ``OpenOptions/backgroundRotation``: it serves at once,
/// and the file ends up on the current key only, with every write made meanwhile.
@Suite("Background rotation")
struct BackgroundRotationTests {
    /// A shell-made fixture on key 1 of `ring`, grown with `blobs` 4 KiB blobs so that the copy
    /// takes many steps. Returns the rows of `people`.
    static func makeFile(at path: String, ring: TestKeyring, walMode: Bool, blobs: Int = 3000) throws {
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 2000, walMode: walMode)
        let database = try EncryptedDatabase(path: path, keys: ring.only(0, database: path))
        try database.write { db in
            try db.execute("CREATE TABLE filler(id INTEGER PRIMARY KEY, body BLOB)")
            try db.execute("CREATE TABLE ledger(id INTEGER PRIMARY KEY, writer INTEGER, body TEXT)")
            try db.execute("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < \(blobs)) INSERT INTO filler(body) SELECT randomblob(4000) FROM n")
        }
    }

    @Test("serves at once on the old key, rotates while 4 tasks write and read, keeps every write", arguments: [false, true])
    func servesWhileRotating(walMode: Bool) async throws {
        let directory = TemporaryDirectory("background")
        let ring = TestKeyring([.passphrase, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Self.makeFile(at: path, ring: ring, walMode: walMode)
        var options = OpenOptions(concurrentReaders: walMode ? 2 : 0)
        options.backgroundRotation = true
        // The copy stops at its 50th write (through the pausing test VFS) until the watcher below
        // has scanned it twice: the watcher sees the copy while it is written, whatever the
        // machine's speed. Installed before the open, so that the copy's connection is seen.
        let watch = VFSWatch(folder: directory.path)
        watch.recording = false
        defer { watch.stop() }
        let copyWrites = Locked(0)
        let copyPaused = watch.pause { event in
            event.after && event.operation == .write && event.path.hasSuffix(".rekey-online")
                && copyWrites.withLock { $0 += 1; return $0 == 50 }
        }
        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: options)
        #expect(database.report.openedWithKeyID == "k1")
        #expect(!database.report.rotated, "the open must not rotate in the foreground")
        let rotation = try #require(database.backgroundRotation)
        // The copy's permissions while it is written, and whether any text of the rows shows in it.
        // (Its descriptors here are the test's, not the database's: the copy is not the database yet.)
        let copyModes = Locked<Set<String>>([])
        let plaintextSeen = Locked(0)
        let scans = ProgressCounter()
        let markers = [Data("person 1".utf8), Data("row 1".utf8)]
        let watcherDone = DispatchSemaphore(value: 0)
        let watcher = Thread {
            defer { watcherDone.signal() }
            while !rotation.state.isFinal {
                for name in (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [] where name.hasSuffix(".rekey-online") {
                    var status = stat()
                    if stat(directory.file(name), &status) == 0 { copyModes.withLock { _ = $0.insert(String(status.st_mode & 0o777, radix: 8)) } }
                    if let content = TestFiles.contents(directory.file(name)) {
                        scans.increment()
                        if markers.contains(where: { content.range(of: $0) != nil }) { plaintextSeen.withLock { $0 += 1 } }
                    }
                }
                usleep(5000)  // paces the scans of the folder; not an order
            }
        }
        watcher.start()
        let scannedWhilePaused = Locked(false)
        Thread {
            if copyPaused.waitUntilReached() != nil {
                let before = scans.value
                scannedWhilePaused.withLock { $0 = scans.wait(untilAtLeast: before + 2) }
            }
            copyPaused.release()
        }.start()

        // 4 tasks write a ledger row each 2 ms and read counts until the rotation has ended.
        let committed = try await withThrowingTaskGroup(of: Int.self) { group in
            for writer in 0..<4 {
                group.addTask {
                    var rows = 0
                    while !rotation.state.isFinal || rows < 20 {
                        let row = rows
                        try await database.write { db in
                            try db.execute("INSERT INTO ledger(writer, body) VALUES (?, ?)", [writer, "row \(row)"])
                        }
                        rows += 1
                        _ = try await database.read { db in try db.queryValue("SELECT count(*) FROM ledger", as: Int.self) }
                        try await Task.sleep(for: .milliseconds(2))  // paces the writes; not an order
                    }
                    return rows
                }
            }
            return try await group.reduce(0, +)
        }
        let report = try await rotation.result()
        copyPaused.release()  // ends the wait above if the copy never reached its 50th write
        #expect(scannedWhilePaused.withLock { $0 }, "the watcher did not scan the copy while its copying was paused")
        #expect(report.method == .backgroundCopy)
        #expect(report.fallbackReason == nil)
        #expect(report.fromKeyID == "k1" && report.toKeyID == "k2")
        let figures = try #require(report.background)
        #expect(figures.steps > 1, "a 12 MB file should take more than one step")
        #expect(database.report.rotation == report)
        #expect(try await database.read { try $0.queryValue("SELECT count(*) FROM ledger", as: Int.self) } == committed)
        #expect(try await database.read { try $0.journalMode() } == (walMode ? "wal" : "delete"))
        // Writes go on after the swap.
        try await database.write { try $0.execute("INSERT INTO ledger(writer, body) VALUES (9, 'after')") }

        // The file, as an independent tool sees it.
        #expect(try SQLCipherShell.opens(path, with: ring.keys[1].shellKey))
        #expect(try !SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
        let shell = try SQLCipherShell.run(path, key: ring.keys[1].shellKey, "PRAGMA user_version; PRAGMA application_id; SELECT count(*) FROM people; SELECT count(*) FROM filler; SELECT count(*) FROM ledger; PRAGMA quick_check;")
        #expect(shell.stdout.split(separator: "\n").map(String.init) == ["42", "1234567", "2000", "3000", "\(committed + 1)", "ok"])
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".rekey-") }
        #expect(leftovers.isEmpty, "temporaries left: \(leftovers)")
        watcherDone.wait()  // a join: the watcher has seen the rotation end and stopped
        // Owner-only while it is written; the database's own mode only in the swap, just before the rename.
        var status = stat()
        #expect(stat(path, &status) == 0)
        let databaseMode = String(status.st_mode & 0o777, radix: 8)
        let modes = copyModes.withLock { $0 }
        #expect(modes.contains("600") && modes.isSubset(of: ["600", databaseMode]), "the copy must be owner-only while it is written (seen: \(modes), database: \(databaseMode))")
        #expect(scans.value > 0, "the copy should have been read while it was written")
        #expect(plaintextSeen.withLock { $0 } == 0, "row text found in the copy")
        let final = try #require(TestFiles.contents(path))
        #expect(!markers.contains { final.range(of: $0) != nil }, "row text found in the rotated file")
    }

    @Test("another open database on the file in this process: it steps aside for the swap, and serves the new file afterwards")
    func otherConnectionInProcess() async throws {
        let directory = TemporaryDirectory("background-inprocess")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Self.makeFile(at: path, ring: ring, walMode: true, blobs: 200)
        let other = try EncryptedDatabase(path: path, keyProvider: { try ring.keyList(database: path) }, options: OpenOptions(rotateToCurrentKey: false))
        var options = OpenOptions()
        options.backgroundRotation = true
        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: options)
        let report = try await #require(database.backgroundRotation).result()
        #expect(report.method == .backgroundCopy, "fallback: \(report.fallbackReason ?? "none")")
        #expect(report.fallbackReason == nil)
        #expect(try await other.read { try $0.queryValue("SELECT count(*) FROM filler", as: Int.self) } == 200)
        #expect(other.report.openedWithKeyID == "k2", "the other database follows the rotation")
        #expect(try !SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
    }

    @Test("another connection of this process holds the rollback-mode file's RESERVED lock (BEGIN IMMEDIATE) across the swap: the swap falls back for that reason without closing a descriptor of the file, so the lock still stops another process's BEGIN IMMEDIATE")
    func otherConnectionInProcessKeepsItsLock() async throws {
        let directory = TemporaryDirectory("background-inprocess-lock")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Self.makeFile(at: path, ring: ring, walMode: false, blobs: 200)
        let old = try ring.keyList(database: path).keys[0]
        /// Another process's `BEGIN IMMEDIATE` with no busy timeout: the shell's error, or `nil` when it got the lock.
        func otherProcessLockError() throws -> String? {
            let result = try SQLCipherShell.run(path, key: ring.keys[0].shellKey, "BEGIN IMMEDIATE;\nROLLBACK;")
            return result.status == 0 ? nil : result.stderr
        }
        // The pausing VFS sees this process's connections (installed before any is opened).
        let watch = VFSWatch(folder: directory.path)
        watch.recording = false
        defer { watch.stop() }

        // Not an EncryptedDatabase (those step aside for the swap): a plain connection in a write
        // transaction, whose POSIX locks closing any descriptor of the file in this process would drop.
        let holder = try Connection(path: path, access: .readWrite, key: old.cipherKey, busyTimeout: .seconds(5))
        defer { holder.close() }
        try holder.execute("BEGIN IMMEDIATE")
        let control = try otherProcessLockError()
        #expect(control?.contains("database is locked") == true, "the holder's lock should stop the shell before the rotation: \(control ?? "it got the lock")")

        var options = OpenOptions()
        options.backgroundRotation = true
        options.busyTimeout = .seconds(60)  // the fallback waits for the holder's lock (a hang guard, not an order)
        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: options)
        let rotation = try #require(database.backgroundRotation)
        // The swap attempt is over once the ordinary rotation that replaces it finds the file
        // busy (the holder's RESERVED lock): it stops there while the other process tries the file.
        let fallbackBusy = watch.pause { event in
            event.after && event.kind == .database && event.path == path && event.operation == .lock && event.result == 5  // SQLITE_BUSY
        }
        defer { fallbackBusy.release() }
        let busy = fallbackBusy.waitUntilReached()
        #expect(busy != nil, "the fallback never waited for the holder's lock")
        let during = try otherProcessLockError()
        #expect(during?.contains("database is locked") == true,
                "after the swap attempt another process took the lock this process's holder has: \(during ?? "its BEGIN IMMEDIATE succeeded")")

        // The holder ends its transaction (a commit would wait for the rotation's SHARED lock,
        // which waits for it), then lets the ordinary rotation go on.
        try holder.execute("ROLLBACK")
        holder.close()
        fallbackBusy.release()
        let report = try await rotation.result()
        #expect(report.method == .pageReencryption)
        #expect(report.fallbackReason == "this process has the file open through another connection")
        #expect(try await database.read { try $0.queryValue("SELECT count(*) FROM filler", as: Int.self) } == 200)
        #expect(try SQLCipherShell.opens(path, with: ring.keys[1].shellKey))
        #expect(try !SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
    }

    @Test("another process has the file open: an ordinary rotation instead, with the reason in the report")
    func otherProcessFallsBack() async throws {
        let directory = TemporaryDirectory("background-other")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Self.makeFile(at: path, ring: ring, walMode: false, blobs: 200)
        // A process that only holds the file open, as an idle connection in rollback mode does.
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/bin/sh")
        holder.arguments = ["-c", "exec 3<\"$1\"; echo ready; exec sleep 60", "holder", path]
        let pipe = Pipe()
        holder.standardOutput = pipe
        try holder.run()
        defer { holder.terminate() }
        _ = pipe.fileHandleForReading.availableData  // "ready": the descriptor is open

        var options = OpenOptions()
        options.backgroundRotation = true
        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: options)
        let rotation = try #require(database.backgroundRotation)
        let report = try await rotation.result()
        #expect(report.method == .pageReencryption)
        #expect(report.fallbackReason == "another process has the file open")
        #expect(try SQLCipherShell.opens(path, with: ring.keys[1].shellKey))
        #expect(try !SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
        #expect(try await database.read { try $0.queryValue("SELECT count(*) FROM filler", as: Int.self) } == 200)
    }

    @Test("another connection commits between every step of the copy, so that every step starts over: after 3 restarts the ordinary rotation runs instead, says why, and keeps every commit", arguments: [false, true])
    func copyStartingOverAtEveryStep(walMode: Bool) async throws {
        let directory = TemporaryDirectory("background-restarts")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        // About 12 MB: more than the copy's largest step (4 MiB), so no step can end the copy.
        try Self.makeFile(at: path, ring: ring, walMode: walMode)
        let old = try ring.keyList(database: path).keys[0]
        // After each step, a commit through another connection: the order comes from the hook on
        // the rotation's thread, so every next step finds the file changed, whatever the speed.
        // Past 20 commits the hook stops writing, so that a copy that never notices its restarts
        // ends (and the test fails) instead of running forever.
        let commits = Locked<[Int]>([])
        RotationFollower.afterCopyStep.withLock { hooks in
            hooks[path] = {
                guard commits.withLock({ $0.count }) < 20 else { return }
                do {
                    let other = try Connection(path: path, access: .readWrite, key: old.cipherKey, busyTimeout: .seconds(30))
                    defer { other.close() }
                    let id = try other.transaction(.immediate) { db in
                        try db.execute("INSERT INTO ledger(writer, body) VALUES (7, 'between steps')")
                        return Int(db.lastInsertRowID)
                    }
                    commits.withLock { $0.append(id) }
                } catch {
                    Issue.record("the commit between two steps failed: \(error)")
                }
            }
        }
        defer { RotationFollower.afterCopyStep.withLock { $0[path] = nil } }

        var options = OpenOptions()
        options.backgroundRotation = true
        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: options)
        let report = try await #require(database.backgroundRotation).result()
        #expect(report.method != .backgroundCopy)
        #expect(report.fallbackReason == "another process writes the file (the copy started over 3 times)")
        let committed = commits.withLock { $0 }
        #expect(committed.count == 3, "one commit after each of the 3 steps before the fallback: \(committed)")
        // Every commit is in the rotated file, which the shell opens with the new key only.
        let ledger = try await database.read { try $0.query("SELECT id FROM ledger WHERE writer = 7 ORDER BY id") { try $0.get(0, as: Int.self) } }
        #expect(ledger == committed)
        #expect(try await database.read { try $0.queryValue("SELECT count(*) FROM filler", as: Int.self) } == 3000)
        #expect(try SQLCipherShell.opens(path, with: ring.keys[1].shellKey))
        #expect(try !SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
    }

    /// What the background copy's verification says about each ``CopyDamage``.
    static func expectedDetail(_ damage: CopyDamage) -> String {
        switch damage {
        case .rowMissing: "has different row counts than the database (people)"
        case .userVersion: "differs from the database: "
        case .pageScribbled: "PRAGMA quick_check"
        }
    }

    @Test("a background copy damaged after its last pages and before its check (FileOperations.written) is never swapped in: the rotation fails with verificationFailed, the file stays intact on its old key and serves, no temporary left",
          arguments: CopyDamage.allCases, [false, true])
    func damagedCopyRefused(_ damage: CopyDamage, walMode: Bool) async throws {
        let directory = TemporaryDirectory("background-verify")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Self.makeFile(at: path, ring: ring, walMode: walMode, blobs: 200)
        let before = try Fixture.digest(of: path, with: ring.only(0, database: path))

        let damaged = EventCounter()
        // quick_check: the check that reads every page of the copy (and compares row counts).
        var options = OpenOptions(verification: .quickCheck)
        options.backgroundRotation = true
        // The copy is complete here, on the new key, and the swap holds the writer's lock; the
        // independent shell spoils it.
        options.files.written = { copy in
            _ = damaged.next()
            if let problem = damage.apply(to: copy, key: ring.keys[1].shellKey) { Issue.record(Comment(rawValue: problem)) }
        }
        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: options)
        let rotation = try #require(database.backgroundRotation)
        let error = await #expect(throws: EncryptedDatabaseError.self) { try await rotation.result() }
        guard case .verificationFailed(path, "k2", let detail)? = error else {
            Issue.record("expected verificationFailed, got \(String(describing: error)) (state \(rotation.state))")
            return
        }
        #expect(detail.hasPrefix("the background copy ") && detail.hasSuffix("the database was left on its old key") && detail.contains(Self.expectedDetail(damage)), "\(detail)")
        guard case .failed = rotation.state else {
            Issue.record("the rotation ended as \(rotation.state), not failed")
            return
        }
        if damage == .userVersion { #expect(detail.contains(", user_version 43, ") && detail.contains(", user_version 42, "), "\(detail)") }
        #expect(damaged.count == 1, "the swap should have handed its copy to the seam once")
        #expect(database.report.rotation == nil, "no rotation recorded")
        // The database serves on its old key, and the file, as the shell sees it, is intact.
        #expect(try await database.read { try Fixture.contentDigest($0) } == before)
        let shell = try SQLCipherShell.run(path, key: ring.keys[0].shellKey, "PRAGMA user_version; SELECT count(*) FROM people; SELECT count(*) FROM filler; PRAGMA quick_check;")
        #expect(shell.stdout.split(separator: "\n").map(String.init) == ["42", "2000", "200", "ok"], "\(shell.stderr)")
        #expect(try !SQLCipherShell.opens(path, with: ring.keys[1].shellKey))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".rekey-") }
        #expect(leftovers.isEmpty, "temporaries left: \(leftovers)")
    }

    @Test("the undamaged copy passes the same check (row counts and quick_check) and is swapped in (the control for the test above)", arguments: [false, true])
    func undamagedCopySwapped(walMode: Bool) async throws {
        let directory = TemporaryDirectory("background-verify-ok")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Self.makeFile(at: path, ring: ring, walMode: walMode, blobs: 200)
        let seen = EventCounter()
        var options = OpenOptions(verification: .quickCheck)
        options.backgroundRotation = true
        options.files.written = { _ in _ = seen.next() }
        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: options)
        let report = try await #require(database.backgroundRotation).result()
        #expect(seen.count == 1)
        #expect(report.method == .backgroundCopy, "fallback: \(report.fallbackReason ?? "none")")
        #expect(report.verification == .quickCheck)
        let shell = try SQLCipherShell.run(path, key: ring.keys[1].shellKey, "PRAGMA user_version; SELECT count(*) FROM people; SELECT count(*) FROM filler;")
        #expect(shell.stdout == "42\n2000\n200\n", "\(shell.stderr)")
    }

    @Test("keys that name non-default settings (8 KiB pages, 10,000 KDF rounds) and a pool of 3 readers: copied in the background (checked with the default facts, and with quick_check and row counts), the shell opens it with those settings and the new key only",
          arguments: [RotationVerification.pages, .quickCheck])
    func nonDefaultSettingsWithPool(verification: RotationVerification) async throws {
        let directory = TemporaryDirectory("background-settings-pool")
        let ring = TestKeyring([.passphrase, .passphrase], in: directory)
        let path = directory.file("app.sqlite")
        let settings = CipherSettings(kdfIterations: 10_000, pageSize: 8192)
        let keys = try KeyList(database: path, keys: ring.keys.map { DatabaseKey(id: $0.id, source: $0.key.source, cipher: settings) }, environment: ring.environment)
        let oldOnly = try KeyList(database: path, keys: [DatabaseKey(id: ring.keys[0].id, source: ring.keys[0].key.source, cipher: settings)], environment: ring.environment)
        do {
            let creator = try EncryptedDatabase(path: path, keys: oldOnly, options: OpenOptions(createIfMissing: true))
            try await creator.writeWithoutTransaction { db in
                _ = try db.queryValue("PRAGMA journal_mode = WAL", as: String.self)
                try db.execute(Fixture.sql(rows: 500))
                try db.execute("CREATE TABLE filler(id INTEGER PRIMARY KEY, body BLOB)")
                try db.execute("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 2000) INSERT INTO filler(body) SELECT randomblob(4000) FROM n")
            }
        }
        var options = OpenOptions(concurrentReaders: 3)
        options.backgroundRotation = true
        options.verification = verification
        let database = try EncryptedDatabase(path: path, keys: keys, options: options)
        let rotation = try #require(database.backgroundRotation)
        // Pooled reads while it copies.
        async let reads: Int = withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    var count = 0
                    repeat {
                        count += try await database.read { try $0.queryValue("SELECT count(*) FROM filler", as: Int.self) } ?? 0
                    } while !rotation.state.isFinal
                    return count
                }
            }
            return try await group.reduce(0, +)
        }
        let report = try await rotation.result()
        #expect(try await reads > 0)
        #expect(report.method == .backgroundCopy, "fallback: \(report.fallbackReason ?? "none")")
        // The swap reports the check it ran: `pages` compares the facts only (reported as `schema`).
        #expect(report.verification == (verification == .pages ? .schema : verification))
        #expect(database.readers?.readerKey.id == "k2")
        #expect(try await database.read { try $0.queryValue("SELECT count(*) FROM filler", as: Int.self) } == 2000)
        #expect(try await database.read { try $0.integerPragma("cipher_page_size") } == 8192)
        // The key line ends in a dot-command on a SQLCipher 4 shell: the SQL starts on a new line.
        let pragmas = "\nPRAGMA kdf_iter = 10000;\nPRAGMA cipher_page_size = 8192;\n"
        let newShell = try SQLCipherShell.run(path, key: nil, ring.keys[1].shellKey.pragma + pragmas + "SELECT count(*) FROM filler; PRAGMA user_version; PRAGMA quick_check;")
        #expect(newShell.stdout.split(separator: "\n").map(String.init) == ["2000", "42", "ok"], "\(newShell.stderr)")
        let oldShell = try SQLCipherShell.run(path, key: nil, ring.keys[0].shellKey.pragma + pragmas + "SELECT count(*) FROM filler;")
        // The same script opened the file with the new key above, so a failure here is the key's.
        #expect(oldShell.status != 0 && oldShell.stderr.contains("not a database") && !oldShell.stdout.contains("2000"),
                "the old key still opens the file: \(oldShell.stdout) \(oldShell.stderr)")
    }

    @Test("new cipher settings: the export runs instead, with the reason in the report")
    func settingsChangeFallsBack() async throws {
        let directory = TemporaryDirectory("background-settings")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Self.makeFile(at: path, ring: ring, walMode: false, blobs: 100)
        let new = ring.keys[1].key
        let keys = try KeyList(database: path, keys: [ring.keys[0].key, DatabaseKey(id: new.id, source: new.source, cipher: CipherSettings(kdfIterations: 10_000, pageSize: 4096))])
        var options = OpenOptions()
        options.backgroundRotation = true
        let database = try EncryptedDatabase(path: path, keys: keys, options: options)
        let report = try await #require(database.backgroundRotation).result()
        #expect(report.method == .export)
        #expect(report.fallbackReason?.contains("cipher settings") == true, "\(report.fallbackReason ?? "no reason")")
        #expect(try await database.read { try $0.queryValue("SELECT count(*) FROM filler", as: Int.self) } == 100)
        #expect(try !SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
    }

    @Test("cancel leaves the file on its old key, intact, without temporaries")
    func cancel() async throws {
        let directory = TemporaryDirectory("background-cancel")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Self.makeFile(at: path, ring: ring, walMode: false, blobs: 6000)
        let before = try Fixture.digest(of: path, with: ring.only(0, database: path))
        var options = OpenOptions()
        options.backgroundRotation = true
        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: options)
        let rotation = try #require(database.backgroundRotation)
        rotation.cancel()
        await #expect(throws: EncryptedDatabaseError.self) { try await rotation.result() }
        guard case .abandoned = rotation.state else {
            Issue.record("the rotation ended as \(rotation.state), not abandoned")
            return
        }
        #expect(try await database.read { try Fixture.contentDigest($0) } == before)
        #expect(try SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".rekey-") }
        #expect(leftovers.isEmpty, "temporaries left: \(leftovers)")
    }

    @Test("a file on the current key starts no background rotation")
    func alreadyCurrent() throws {
        let directory = TemporaryDirectory("background-current")
        let ring = TestKeyring([.hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey)
        var options = OpenOptions()
        options.backgroundRotation = true
        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: options)
        #expect(database.backgroundRotation == nil)
        #expect(try database.rotateInBackground() == nil)
    }
}
