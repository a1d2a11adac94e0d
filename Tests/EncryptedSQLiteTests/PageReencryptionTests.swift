import DurableFiles
@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Testing
import TestSupport

/// One file layout for the page re-encryption matrix.
struct PageCase: CustomTestStringConvertible, Sendable {
    let pageSize: Int
    let walMode: Bool
    let oldKind: SourceKind
    let newKind: SourceKind
    let kdfIterations: Int?
    var testDescription: String {
        "\(pageSize)-byte pages, \(walMode ? "WAL" : "rollback journal"), \(oldKind) → \(newKind)" + (kdfIterations.map { ", kdf_iter \($0)" } ?? "")
    }
}

// 512-byte pages cannot carry SQLCipher's 48-byte reserve (SQLite needs 480 usable bytes a page).
let pageCases: [PageCase] = [1024, 2048, 4096, 65536].flatMap { size in
    [false, true].map { wal in
        PageCase(pageSize: size, walMode: wal, oldKind: wal ? .hex : .passphrase, newKind: wal ? .passphrase : .hex,
                 kdfIterations: size == 4096 ? 10_000 : nil)
    }
}

@Suite("Page re-encryption (the default rotation)", .ownThread)
struct PageReencryptionTests {
    /// A file made by the sqlcipher shell with `scenario`'s settings, and a key list old → new.
    private func makeFile(_ scenario: PageCase, in directory: TemporaryDirectory, rows: Int = 3000) throws -> (path: String, ring: TestKeyring, keys: KeyList) {
        let ring = TestKeyring([scenario.oldKind, scenario.newKind], in: directory)
        let settings = CipherSettings(kdfIterations: scenario.kdfIterations, pageSize: scenario.pageSize)
        let path = directory.file("app.sqlite")
        var pragmas = "PRAGMA cipher_page_size = \(scenario.pageSize);\n"
        if let kdf = scenario.kdfIterations { pragmas += "PRAGMA kdf_iter = \(kdf);\n" }
        if scenario.walMode { pragmas += "PRAGMA journal_mode = WAL;\n" }
        let made = try SQLCipherShell.run(path, key: ring.keys[0].shellKey, pragmas + Fixture.sql(rows: rows)
            + "\nCREATE TABLE blobs(id INTEGER PRIMARY KEY, b BLOB);\nWITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 300) INSERT INTO blobs(b) SELECT randomblob(3000) FROM n;\n")
        #expect(made.status == 0, "\(made.stderr)")
        let keys = try KeyList(database: path, keys: ring.keys.map { DatabaseKey(id: $0.id, source: $0.key.source, cipher: settings) }, environment: ring.environment)
        return (path, ring, keys)
    }

    private func shellKey(_ key: TestKey, _ scenario: PageCase) -> String {
        "\(key.shellKey.pragma)\nPRAGMA cipher_page_size = \(scenario.pageSize);\n" + (scenario.kdfIterations.map { "PRAGMA kdf_iter = \($0);\n" } ?? "")
    }

    /// Runs `sql` in the sqlcipher shell with `key` and the scenario's settings.
    private func shell(_ path: String, _ key: TestKey, _ scenario: PageCase, _ sql: String) throws -> ProcessResult {
        try SQLCipherShell.run(path, key: nil, shellKey(key, scenario) + sql)
    }

    @Test("a file made by the sqlcipher shell is re-encrypted page by page: every page size, raw keys and passphrases, rollback and WAL mode",
          arguments: pageCases)
    func matrix(_ scenario: PageCase) throws {
        let directory = TemporaryDirectory("pages")
        let (path, ring, keys) = try makeFile(scenario, in: directory)
        let onlyOld = try KeyList(database: path, keys: [keys.keys[0].asDatabaseKey], environment: ring.environment)
        let before = try Fixture.digest(of: path, with: onlyOld)
        let saltBefore = DerivedKey.salt(ofFileAt: path)
        let size = FileSystem.size(of: path)

        do {
            let database = try EncryptedDatabase(path: path, keys: keys)
            let rotation = try #require(database.report.rotation)
            #expect(rotation.method == .pageReencryption)
            #expect(rotation.verification == .pages)
            #expect(rotation.journalMode == (scenario.walMode ? "wal" : "delete"))
            #expect(try database.read { try $0.journalMode() } == (scenario.walMode ? "wal" : "delete"))
            #expect(try database.read { try Fixture.contentDigest($0) } == before)
            #expect(try database.read { try $0.queryValue("PRAGMA integrity_check", as: String.self) } == "ok")
        }
        // The salt stays: SQLCipher reads it before rolling back a hot journal (see `interrupted`).
        #expect(DerivedKey.salt(ofFileAt: path) == saltBefore)
        #expect(FileSystem.size(of: path) == size)
        #expect(databaseSideFiles(in: directory).isEmpty, "\(databaseSideFiles(in: directory))")

        // The independent shell: the new key opens the file and finds it intact; the old key does not.
        let checked = try shell(path, ring.keys[1], scenario, "PRAGMA integrity_check; SELECT count(*) FROM people; SELECT count(*), sum(length(b)) FROM blobs; PRAGMA user_version;")
        #expect(checked.stdout.split(separator: "\n") == ["ok", "3000", "300|900000", "42"], "\(checked.stderr)")
        let old = try shell(path, ring.keys[0], scenario, "SELECT count(*) FROM people;")
        #expect(old.status != 0)
    }

    @Test("any thread count rotates the same file intact: 1, 3 (more than this machine's cores), and 10,000, which the options cap at 256",
          arguments: [1, 3, 10_000])
    func threadCounts(_ threads: Int) throws {
        let scenario = PageCase(pageSize: 1024, walMode: false, oldKind: .hex, newKind: .hex, kdfIterations: nil)
        let directory = TemporaryDirectory("threads")
        let (path, ring, keys) = try makeFile(scenario, in: directory)
        let onlyOld = try KeyList(database: path, keys: [keys.keys[0].asDatabaseKey], environment: ring.environment)
        let before = try Fixture.digest(of: path, with: onlyOld)
        let options = OpenOptions(rotationThreads: threads)
        #expect(options.rotationThreads == min(threads, OpenOptions.maximumRotationThreads))
        do {
            let database = try EncryptedDatabase(path: path, keys: keys, options: options)
            #expect(database.report.rotation?.method == .pageReencryption)
            #expect(try database.read { try Fixture.contentDigest($0) } == before)
        }
        let checked = try shell(path, ring.keys[1], scenario, "PRAGMA integrity_check; SELECT count(*) FROM people;")
        #expect(checked.stdout.split(separator: "\n") == ["ok", "3000"], "\(checked.stderr)")
        #expect(databaseSideFiles(in: directory).isEmpty)
    }

    /// Where the interruption falls among the rotation's writes to the database and its final sync.
    enum Instant: String, CaseIterable, Sendable {
        case firstWrite, middleWrite, lastWrite, finalSync
    }

    @Test("a rotation interrupted at any write or sync leaves a hot journal: the sqlcipher shell with the old key and the library both find the original, and the library's own rollback restores it byte for byte",
          arguments: Instant.allCases)
    func interrupted(at instant: Instant) throws {
        let directory = TemporaryDirectory("interrupt")
        let scenario = PageCase(pageSize: 1024, walMode: false, oldKind: .passphrase, newKind: .hex, kdfIterations: nil)
        let (path, ring, keys) = try makeFile(scenario, in: directory, rows: 1500)
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        let onlyOld = try KeyList(database: path, keys: [keys.keys[0].asDatabaseKey], environment: ring.environment)  // with the scenario's settings
        let before = try Fixture.digest(of: path, with: onlyOld)
        let image = TemporaryDirectory("crash-image")

        // Count the writes and syncs of an uninterrupted rotation of a copy.
        let counter = EventCounter()
        let rehearsal = directory.file("rehearsal.sqlite")
        try TestFiles.copy(path, to: rehearsal)
        var counting = OpenOptions()
        counting.files.observe = { FaultyFile($0, counter: counter, failingAt: nil) {} }
        _ = try EncryptedDatabase(path: rehearsal, keys: KeyList(database: rehearsal, keys: keys.keys.map(\.asDatabaseKey)), options: counting)
        let events = counter.count
        #expect(events >= 4, "the rotation should write several chunks, then sync")
        let event = switch instant {
        case .firstWrite: 1
        case .middleWrite: events / 2
        case .lastWrite: events - 1
        case .finalSync: events
        }

        var options = OpenOptions()
        options.files.observe = { FaultyFile($0, counter: EventCounter(), failingAt: event) { copyState(of: path, into: image) } }
        #expect {
            _ = try EncryptedDatabase(path: path, keys: keys, options: options)
        } throws: { error in
            guard case .rotationNotApplied(path, "k1", _, let detail) = error as? EncryptedDatabaseError else { return false }
            return detail.contains("rolled back")
        }
        // The library rolled its own failure back: the very same bytes, no journal left.
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == original)
        #expect(databaseSideFiles(in: directory).isEmpty, "\(databaseSideFiles(in: directory))")

        // What a kill at that instant leaves: a database mid-rewrite and a hot journal.
        let crashed = image.file("app.sqlite")
        #expect(FileManager.default.fileExists(atPath: crashed + "-journal"))
        let copy = image.file("copy.sqlite")
        try TestFiles.copy(crashed, to: copy)
        try TestFiles.copy(crashed + "-journal", to: copy + "-journal")
        let recovered = try shell(copy, ring.keys[0], scenario, "PRAGMA integrity_check; SELECT count(*) FROM people; SELECT count(*) FROM blobs;")
        #expect(recovered.stdout.split(separator: "\n") == ["ok", "1500", "300"], "\(recovered.stderr)")
        #expect(!FileManager.default.fileExists(atPath: copy + "-journal"), "the shell rolled the journal back and removed it")
        #expect(try Data(contentsOf: URL(fileURLWithPath: copy)) == original)

        let reopened = try EncryptedDatabase(path: crashed, keys: KeyList(database: crashed, keys: keys.keys.map(\.asDatabaseKey), environment: ring.environment),
                                             options: OpenOptions(rotateToCurrentKey: false))
        #expect(reopened.report.openedWithKeyID == "k1")
        #expect(try reopened.read { try Fixture.contentDigest($0) } == before)
    }

    @Test("a page that no longer authenticates with the old key stops the rotation while the journal is written, before the database is: the file is unchanged, no journal is left, and the error names the page")
    func damagedPage() throws {
        let directory = TemporaryDirectory("damaged")
        let scenario = PageCase(pageSize: 1024, walMode: false, oldKind: .hex, newKind: .hex, kdfIterations: nil)
        let (path, _, keys) = try makeFile(scenario, in: directory, rows: 1500)
        let damagedPage = Int(FileSystem.size(of: path) ?? 0) / 1024 - 3  // a page of the blobs table, not read when the key is probed
        try flipByte(in: path, at: (damagedPage - 1) * 1024 + 100)
        let damaged = FileSnapshot(path)
        #expect {
            _ = try EncryptedDatabase(path: path, keys: keys)
        } throws: { error in
            guard case .rotationNotApplied(path, "k1", _, let detail) = error as? EncryptedDatabaseError else { return false }
            return detail.contains("page \(damagedPage) ") && detail.contains("damaged") && detail.contains("the database was not written")
        }
        #expect(FileSnapshot(path) == damaged)
        #expect(databaseSideFiles(in: directory).isEmpty, "\(databaseSideFiles(in: directory))")
    }

    @Test("when the engine does not open the committed file with the new key, the journal is put back and the file rolled back to the old key")
    func engineRefusesTheResult() throws {
        let directory = TemporaryDirectory("undo")
        let scenario = PageCase(pageSize: 1024, walMode: false, oldKind: .passphrase, newKind: .passphrase, kdfIterations: nil)
        let (path, ring, keys) = try makeFile(scenario, in: directory, rows: 500)
        let original = FileSnapshot(path)
        var options = OpenOptions()
        let system = FileOperations.system
        options.files.rename = { source, target throws(FileSystemError) in
            try system.rename(source, target)
            // Right after the commit, spoil page 1 the way an incompatible encryption would.
            if target.hasSuffix(RotationTemporaries.undoSuffix) { try? flipByte(in: path, at: 500) }
        }
        #expect {
            _ = try EncryptedDatabase(path: path, keys: keys, options: options)
        } throws: { error in
            guard case .rotationNotApplied(path, "k1", "k2", let detail) = error as? EncryptedDatabaseError else { return false }
            return detail.contains("does not open the rewritten file") && detail.contains("rolled back")
        }
        #expect(FileSnapshot(path) == original)
        #expect(try shell(path, ring.keys[0], scenario, "PRAGMA integrity_check;").stdout == "ok\n")
    }

    @Test("a WAL file is back in WAL mode the moment its page re-encryption commits: nothing writes the file after the commit, and a process killed right after it leaves the file on the new key, in WAL mode, with nothing beside it")
    func walModeCommitsWithTheKey() throws {
        // Before, `PRAGMA journal_mode = WAL` ran after the commit: a SQLite transaction through a
        // rollback journal whose header stays zeroed until its first sync. The rekey CLI killed
        // there (reproduced with strace's fault injection at that fdatasync) left the file in
        // rollback mode beside a `-journal` that SQLite ignores and no later open removed.
        let directory = TemporaryDirectory("wal-commit")
        let scenario = PageCase(pageSize: 1024, walMode: true, oldKind: .hex, newKind: .passphrase, kdfIterations: nil)
        let (path, ring, keys) = try makeFile(scenario, in: directory, rows: 500)
        let image = TemporaryDirectory("wal-commit-image")
        var options = OpenOptions()
        let system = FileOperations.system
        options.files.rename = { source, target throws(FileSystemError) in
            try system.rename(source, target)
            // The commit: the files a process killed right now leaves.
            if target.hasSuffix(RotationTemporaries.undoSuffix) { copyState(of: path, into: image) }
        }
        do {
            let database = try EncryptedDatabase(path: path, keys: keys, options: options)
            #expect(database.report.rotation?.method == .pageReencryption)
            #expect(try database.read { try $0.journalMode() } == "wal")
        }
        #expect(databaseSideFiles(in: directory).isEmpty)
        let killed = image.file("app.sqlite")
        #expect(image.listing() == ["app.sqlite"])
        #expect(FileSnapshot(path).bytes == FileSnapshot(killed).bytes, "the file was written after the commit")

        let shell = try shell(killed, ring.keys[1], scenario, "SELECT count(*) > 0 FROM sqlite_master;\nPRAGMA journal_mode;")
        #expect(shell.stdout.split(separator: "\n") == ["1", "wal"], "\(shell.stderr)")
        do {
            let database = try EncryptedDatabase(path: killed, keys: KeyList(database: killed, keys: keys.keys.map(\.asDatabaseKey), environment: ring.environment))
            #expect(database.report.openedWithKeyID == ring.keys[1].id)
            #expect(database.report.rotation == nil)
            #expect(try database.read { try $0.journalMode() } == "wal")
        }
        #expect(databaseSideFiles(in: image).isEmpty)
    }

    @Test("files the page re-encryption does not handle rotate with the engine's rekey: no HMAC, WAL with another connection, a leftover journal, or the engineRekey strategy")
    func fallbacks() throws {
        // No HMAC (SQLCipher 1.x layout with 3.x key derivation).
        do {
            let directory = TemporaryDirectory("fallback-nohmac")
            let ring = TestKeyring([.hex, .hex], in: directory)
            let path = directory.file("app.sqlite")
            let made = try SQLCipherShell.run(path, key: ring.keys[0].shellKey, "PRAGMA cipher_use_hmac = OFF;\n" + Fixture.sql())
            #expect(made.status == 0)
            let settings = CipherSettings(useHMAC: false)
            let keys = try KeyList(database: path, keys: ring.keys.map { DatabaseKey(id: $0.id, source: $0.key.source, cipher: settings) })
            let rotation = try #require(try EncryptedDatabase(path: path, keys: keys).report.rotation)
            #expect(rotation.method == .inPlace)
            let checked = try SQLCipherShell.run(path, key: ring.keys[1].shellKey, "PRAGMA cipher_use_hmac = OFF; PRAGMA integrity_check; SELECT count(*) FROM people;")
            #expect(checked.stdout.split(separator: "\n") == ["ok", "200"])
        }
        // WAL mode while another connection has the file open.
        do {
            let directory = TemporaryDirectory("fallback-wal")
            let ring = TestKeyring([.hex, .passphrase], in: directory)
            let path = directory.file("app.sqlite")
            try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, walMode: true)
            let other = try EncryptedDatabase(path: path, keys: ring.only(0, database: path))
            _ = try other.read { try $0.queryValue("SELECT count(*) FROM people", as: Int.self) }
            let rotated = try EncryptedDatabase(path: path, keys: ring.keyList(database: path))
            #expect(rotated.report.rotation?.method == .inPlace)
            #expect(try rotated.read { try $0.journalMode() } == "wal")
            withExtendedLifetime(other) {}
            #expect(try SQLCipherShell.opens(path, with: ring.keys[1].shellKey))
        }
        // A leftover (not hot) journal beside the file, and the explicit engineRekey strategy.
        for leftover in [true, false] {
            let directory = TemporaryDirectory("fallback-journal")
            let ring = TestKeyring([.passphrase, .hex], in: directory)
            let path = directory.file("app.sqlite")
            try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey)
            if leftover { _ = FileManager.default.createFile(atPath: path + "-journal", contents: Data()) }
            let options = OpenOptions(rotationStrategy: leftover ? .automatic : .engineRekey)
            let rotation = try #require(try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: options).report.rotation)
            #expect(rotation.method == .inPlace)
            #expect(try SQLCipherShell.opens(path, with: ring.keys[1].shellKey))
            #expect(try !SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
        }
    }

    /// A file on `keys[0]`, a rotation of it to `keys[1]` whose connection read the file while it
    /// was in rollback mode (as a process starting up does), and a `sqlcipher` shell that has since
    /// switched it to WAL mode and committed a row that stays in the `-wal` while it keeps the file
    /// open. The caller runs the rotation, then releases the shell.
    private struct FileTurnedWAL {
        let directory: TemporaryDirectory
        let ring: TestKeyring
        let path: String
        let connection: Connection
        let holder: ShellHolder
        let plan: RotationPlan
        let context: RotationContext

        init(_ label: String, newSettings: CipherSettings? = nil) throws {
            directory = TemporaryDirectory(label)
            ring = TestKeyring([.hex, .hex], in: directory)
            path = directory.file("app.sqlite")
            try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey)
            let keys = try KeyList(database: path, keys: [DatabaseKey(id: "old", source: ring.keys[0].key.source),
                                                          DatabaseKey(id: "new", source: ring.keys[1].key.source, cipher: newSettings ?? CipherSettings())])
            connection = try Connection(path: path, access: .readWrite, key: keys.keys[0].cipherKey, busyTimeout: .seconds(2))
            try connection.verifyReadable()
            // The shell in WAL mode holding a committed row, with the file open.
            holder = try ShellHolder(shell: try #require(SQLCipherShell.path), database: path, key: ring.keys[0].shellKey,
                                     sql: "PRAGMA journal_mode = WAL;\nINSERT INTO people(name) VALUES ('in the wal');")
            context = RotationContext(path: path, from: keys.keys[0], to: keys.keys[1], busyTimeout: .seconds(2), verification: .pages,
                                      logger: OpenOptions().logger, files: .system, workers: 2)
            plan = RotationPlan(from: keys.keys[0], to: keys.keys[1], strategy: .automatic)
        }

        /// What the `sqlcipher` shell with key `index` reads: integrity check, rows, the WAL's row.
        func shellCheck(key index: Int) throws -> [Substring] {
            let checked = try SQLCipherShell.run(path, key: ring.keys[index].shellKey,
                                                 "PRAGMA integrity_check; SELECT count(*) FROM people; SELECT count(*) FROM people WHERE name = 'in the wal';")
            return checked.stdout.split(separator: "\n")
        }
    }

    @Test("a rotation whose connection saw the file in rollback mode before another process put it in WAL mode does not rewrite the file under that process's WAL: the WAL's rows survive and the file ends on the new key")
    func fileTurnedWALUnderTheRotation() throws {
        let setup = try FileTurnedWAL("turned-wal")
        #expect(setup.plan.method == .pageReencryption)
        let (rotated, report) = try setup.plan.run(setup.connection, in: setup.context)
        // Page re-encryption cannot run while another process has the WAL-mode file open.
        #expect(report.method == .inPlace)
        rotated.close()
        setup.holder.release()
        #expect(try setup.shellCheck(key: 1) == ["ok", "201", "1"])
        #expect(try !SQLCipherShell.opens(setup.path, with: setup.ring.keys[0].shellKey))
    }

    @Test("an export (new cipher settings) whose connection saw the file in rollback mode before another process put it in WAL mode is refused as busy: the file and the WAL's row are untouched")
    func exportRefusedWhenFileTurnedWAL() throws {
        let setup = try FileTurnedWAL("turned-wal-export", newSettings: CipherSettings(kdfIterations: 10_000))
        #expect(setup.plan.method == .export)
        #expect {
            _ = try setup.plan.run(setup.connection, in: setup.context)
        } throws: { error in
            (error as? EncryptedDatabaseError)?.category == .busy && "\(error)".contains("WAL mode")
        }
        setup.holder.release()
        #expect(try setup.shellCheck(key: 0) == ["ok", "201", "1"])
        #expect(databaseSideFiles(in: setup.directory).filter { $0.contains("rekey") }.isEmpty)
    }

    @Test("a connection that had the file open with the old key can neither read nor write after the rotation")
    func staleConnection() throws {
        let directory = TemporaryDirectory("stale")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey)
        let before = try Fixture.digest(of: path, with: ring.only(0, database: path))
        let stale = try EncryptedDatabase(path: path, keys: ring.only(0, database: path))
        #expect(try stale.read { try $0.queryValue("SELECT count(*) FROM people", as: Int.self) } == 200)

        let rotated = try EncryptedDatabase(path: path, keys: ring.keyList(database: path))
        #expect(rotated.report.rotation?.method == .pageReencryption)
        // Not any error: the stale database sees the rotation, finds no key of its own list for the
        // file, and says what to do.
        let lacksKey = EncryptedDatabaseError.keyUnavailable(path: path, reason: """
            the file was rotated by another process while this process had it open, and no key of this process's key list opens it \
            now (tried: k1), which was given once when the database was opened: open it with EncryptedDatabase(path:keysFile:options:) \
            or a key provider so that running processes follow rotations, or restart the process. Nothing was changed.
            """)
        #expect(throws: lacksKey) { try stale.read { try $0.queryValue("SELECT count(*) FROM people", as: Int.self) } }
        #expect(throws: lacksKey) { try stale.write { try $0.execute("INSERT INTO people(name) VALUES ('lost')") } }
        #expect(try rotated.read { try Fixture.contentDigest($0) } == before)
        #expect(try SQLCipherShell.opens(path, with: ring.keys[1].shellKey))
    }

    @Test("a passphrase that reads like x'<64 hex>' is a raw key to SQLCipher, and to the library: pooled readers open without a KDF and page re-encryption rotates from and to it")
    func passphraseThatLooksRaw() throws {
        let directory = TemporaryDirectory("looks-raw")
        let path = directory.file("app.sqlite")
        let (oldHex, newHex) = (TestKeys.hex(), TestKeys.hex())
        try Fixture.createWithShell(at: path, key: .hex(oldHex))
        // Given as passphrases: SQLCipher still reads the bytes x'…' as raw keys.
        let keys = try KeyList(database: path, keys: [
            DatabaseKey(id: "old", source: .passphrase("x'\(oldHex)'")),
            DatabaseKey(id: "new", source: .passphrase("x'\(newHex)'")),
        ])
        let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(concurrentReaders: 2))
        #expect(database.report.rotation?.method == .pageReencryption)
        #expect(try database.read { try $0.queryValue("SELECT count(*) FROM people", as: Int.self) } == 200)
        #expect(try SQLCipherShell.opens(path, with: .hex(newHex)))
        #expect(try !SQLCipherShell.opens(path, with: .hex(oldHex)))
    }

    @Test("a stale undo journal of a killed rotation is removed by the next open; one a live process holds is kept")
    func staleUndoFile() throws {
        let directory = TemporaryDirectory("undo-stale")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey)
        let stale = directory.file(".app.sqlite.0badc0de.rekey-undo")
        _ = FileManager.default.createFile(atPath: stale, contents: Data("old pages".utf8))
        let held = directory.file(".app.sqlite.12345678.rekey-undo")
        let holder = try DescriptorFile(creating: held, mode: 0o600, ownerOf: nil)
        _ = try EncryptedDatabase(path: path, keys: ring.keyList(database: path))
        #expect(!FileManager.default.fileExists(atPath: stale))
        #expect(FileManager.default.fileExists(atPath: held))
        holder.close()
    }

    @Test("a database larger than 1 GiB skips SQLite's lock-byte page and rotates intact (set REKEY_LARGE_FILE_TEST=1; takes minutes)",
          .enabled(if: ProcessInfo.processInfo.environment["REKEY_LARGE_FILE_TEST"] == "1"))
    func largerThanOneGiB() throws {
        let directory = TemporaryDirectory("large")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        let made = try SQLCipherShell.run(path, key: ring.keys[0].shellKey, """
            CREATE TABLE big(id INTEGER PRIMARY KEY, payload BLOB);
            WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 1100000) INSERT INTO big(payload) SELECT randomblob(1000) FROM n;
            """)
        #expect(made.status == 0, "\(made.stderr)")
        #expect((FileSystem.size(of: path) ?? 0) > 0x4000_0000 + 1024)
        let before = try Fixture.digest(of: path, with: ring.only(0, database: path))
        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path))
        #expect(database.report.rotation?.method == .pageReencryption)
        #expect(try database.read { try Fixture.contentDigest($0) } == before)
        #expect(try SQLCipherShell.opens(path, with: ring.keys[1].shellKey))
    }
}

/// The names beside the database that a rotation must not leave behind.
func databaseSideFiles(in directory: TemporaryDirectory) -> [String] {
    directory.listing().filter { $0.hasSuffix("-journal") || $0.hasSuffix("-wal") || $0.hasSuffix("-shm") || $0.contains(".rekey-") }
}

/// Flips the bits of one byte of a file in place.
func flipByte(in path: String, at offset: Int) throws {
    let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
    defer { try? handle.close() }
    try handle.seek(toOffset: UInt64(offset))
    let byte = try handle.read(upToCount: 1) ?? Data([0])
    try handle.seek(toOffset: UInt64(offset))
    try handle.write(contentsOf: Data([byte[0] ^ 0xFF]))
}

/// Copies a database and its journal into `folder` under the same names: the files a process
/// killed at this instant would leave.
func copyState(of path: String, into folder: TemporaryDirectory) {
    let name = URL(fileURLWithPath: path).lastPathComponent
    for suffix in ["", "-journal"] where FileManager.default.fileExists(atPath: path + suffix) {
        try? FileManager.default.removeItem(atPath: folder.file(name + suffix))
        try? TestFiles.copy(path + suffix, to: folder.file(name + suffix))
    }
}

/// Counts writes and syncs, from any thread.
final class EventCounter: Sendable {
    private let value = Locked(0)
    /// Counts one more event and returns its number (from 1).
    func next() -> Int { value.withLock { count in count += 1; return count } }
    /// The events counted so far.
    var count: Int { value.withLock { $0 } }
}

/// A database handle that counts its writes and syncs and fails the `failingAt`-th (from 1), after
/// running `atFailure`; every other call goes through.
final class FaultyFile: RandomAccessFile, @unchecked Sendable {
    private let base: any RandomAccessFile
    private let counter: EventCounter
    private let failingAt: Int?
    private let atFailure: @Sendable () -> Void

    init(_ base: any RandomAccessFile, counter: EventCounter, failingAt: Int?, atFailure: @escaping @Sendable () -> Void) {
        self.base = base
        self.counter = counter
        self.failingAt = failingAt
        self.atFailure = atFailure
    }

    var path: String { base.path }

    private func event() throws(FileSystemError) {
        let number = counter.next()
        if number == failingAt {
            atFailure()
            throw .failed(operation: "injected failure at event \(number) on \(path)", errno: EIO)
        }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(FileSystemError) -> Int { try base.read(into: buffer, at: offset) }
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(FileSystemError) {
        try event()
        try base.write(bytes, at: offset)
    }
    func synchronize() throws(FileSystemError) {
        try event()
        try base.synchronize()
    }
    func size() throws(FileSystemError) -> Int64 { try base.size() }
    func close() { base.close() }
}

extension ResolvedKey {
    /// The key as a ``DatabaseKey`` again (same material and settings), to build another key list.
    var asDatabaseKey: DatabaseKey {
        DatabaseKey(id: id, source: .material(material!), cipher: cipher, legacy: legacy)
    }
}
