import DurableFiles
import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// Every user-visible operation on every combination of file format, journal mode, reader pool
/// and key kind the linked engine accepts (dimensions: ConfigurationMatrix.swift), checked as a
/// user would check real files: with the library on fresh key lists and with the independent
/// `sqlcipher` shell. A pairwise covering set by default; `MATRIX=full` for the full product.
/// Combinations the engine refuses are checked for their error.
@Suite("Configuration matrix: every feature with every file format", .ownThread)
struct ConfigurationMatrixTests {
    @Test("open, write, read (pool), rotate by every strategy, back up, health, follow a rotation made elsewhere",
          arguments: ConfigurationMatrix.selected)
    func operations(_ combination: MatrixCombination) throws {
        try MatrixRun(combination).run()
    }

    @Test("a combination the engine refuses fails with its error and leaves no file", arguments: ConfigurationMatrix.selectedRefused)
    func refused(_ combination: MatrixCombination) throws {
        #expect(combination.refusal != nil)
        let directory = TemporaryDirectory("matrix-refused")
        let ring = TestKeyring([combination.keyKind.sourceKind, combination.keyKind.sourceKind], in: directory)
        let path = directory.file("app.sqlite")
        let keys = ring.keys.map { DatabaseKey(id: $0.id, source: $0.key.source, cipher: combination.format.settings) }
        // In code: the key list is refused before any file is touched.
        #expect {
            _ = try KeyList(database: path, keys: keys, environment: ring.environment)
        } throws: { error in
            guard case .invalidCipherSettings(let keyID, _, let problem)? = error as? KeyConfigurationError else { return false }
            return keyID == "k1" && problem.contains("needs SQLCipher 4")
        }
        // In a Keys file: refused when the file is loaded.
        let keysFile = directory.file("Keys")
        try MatrixRun.writeKeysFile(keysFile, database: "app.sqlite", entries: Array(zip(keys, ring.keys)), ring: ring)
        #expect {
            _ = try KeysFile.load(path: keysFile).keyList(forDatabase: path, environment: ring.environment)
        } throws: { error in
            guard case .invalidCipherSettings(let keyID, _, _)? = error as? KeyConfigurationError else { return false }
            return keyID == "k1"
        }
        let options = OpenOptions(createIfMissing: true, concurrentReaders: combination.readers.count)
        #expect(throws: (any Error).self) { _ = try EncryptedDatabase(path: path, keysFile: keysFile, options: options) }
        #expect(!FileManager.default.fileExists(atPath: path))
        // A real SQLCipher 4 file (made by SQLCipher 4.12, when installed) opened here with a key
        // in the engine's own format: the error names the right key and says this engine cannot read it.
        guard SQLCipher4.isAvailable else {
            if SQLCipher4.interopTestsRun { Issue.record("SQLCipher 4 is needed to make a 4.x file: \(SQLCipher4.unavailableReason ?? "")") }
            return
        }
        _ = try SQLCipher4.execute(path, key: ring.keys[0].shellKey, compatibility3: false, [
            "CREATE TABLE people(id INTEGER PRIMARY KEY, name TEXT)", "INSERT INTO people(name) VALUES ('x')",
        ] + (combination.journal == .wal ? ["PRAGMA journal_mode = WAL"] : []))
        let snapshot = FileSnapshot(path)
        let plain = try KeyList(database: path, keys: ring.keys.map(\.key), environment: ring.environment)
        #expect {
            _ = try EncryptedDatabase(path: path, keys: plain, options: OpenOptions(concurrentReaders: combination.readers.count))
        } throws: { error in
            guard case .sqlcipher4File(_, let keyID, _)? = error as? EncryptedDatabaseError else { return false }
            return keyID == "k1"
        }
        #expect(FileSnapshot(path) == snapshot)
    }

    @Test("the pairwise set holds every pair of values the valid combinations hold, is deterministic and smaller than the product")
    func pairwiseCoverage() {
        let valid = ConfigurationMatrix.valid.map(\.row)
        let chosen = ConfigurationMatrix.pairwise.map(\.row)
        let needed = valid.reduce(into: Set<Pairwise.Pair>()) { $0.formUnion(Pairwise.pairs(of: $1)) }
        let held = chosen.reduce(into: Set<Pairwise.Pair>()) { $0.formUnion(Pairwise.pairs(of: $1)) }
        #expect(needed.subtracting(held).isEmpty, "pairs not covered: \(needed.subtracting(held))")
        #expect(Set(chosen).isSubset(of: Set(valid)))
        #expect(Set(chosen).count == chosen.count, "no combination twice")
        #expect(Pairwise.covering(valid) == chosen)
        #expect(chosen.count < valid.count)
        // The largest two dimensions bound the set from below: every pair of their values needs a row.
        #expect(chosen.count >= MatrixFormat.allCases.filter { $0.refusal == nil }.count * MatrixKeyKind.allCases.count)
        // Control: dropping any one chosen row leaves some pair uncovered (no row is wasted).
        for index in chosen.indices {
            var fewer = chosen
            fewer.remove(at: index)
            let fewerHeld = fewer.reduce(into: Set<Pairwise.Pair>()) { $0.formUnion(Pairwise.pairs(of: $1)) }
            #expect(!needed.subtracting(fewerHeld).isEmpty, "row \(chosen[index]) adds no pair")
        }
        print("configuration matrix on SQLCipher \(SQLCipherEngine.linked.version): \(ConfigurationMatrix.all.count) combinations, \(valid.count) valid, \(ConfigurationMatrix.refused.count) refused, pairwise \(chosen.count)")
    }

    @Test("control: the matrix's checks report a file that was not rotated, and a wrong row count")
    func checksCanFail() throws {
        let run = try MatrixRun(MatrixCombination(format: .kdfAndPageSize, journal: .rollback, readers: .none, keyKind: .hex))
        try run.makeFileWithShell()
        try run.writeKeysFile(count: 2)
        // The file is on k1: claiming it was rotated to k2 must fail (library and shell checks).
        withKnownIssue { try run.verifyOnKeyOnly(2, previous: 1, digest: "x", stage: "control", pageSize: 2048) }
        // A wrong expected row count must fail too.
        run.notes = 5
        withKnownIssue { try run.verifyOnKeyOnly(1, previous: 2, digest: nil, stage: "control", pageSize: 2048) }
    }
}

/// One combination's run: a folder, a Keys file whose list grows as the test rotates, key
/// material of the combination's kind, and the expected content.
final class MatrixRun {
    let combination: MatrixCombination
    let directory = TemporaryDirectory("matrix")
    let ring: TestKeyring
    var path: String { directory.file("app.sqlite") }
    var keysFile: String { directory.file("Keys") }
    /// Fixture rows in `people`; rows the test wrote into `notes`.
    let fixtureRows = 60
    var notes = 0
    /// The number of keys the Keys file lists now.
    var listed = 0

    /// Six keys of the combination's kind: k1 makes the file, k3 is current at the first open,
    /// k4 is appended for `rotateToCurrentKey()`, k5 for the rotation made elsewhere, k6 (in the
    /// export target's format) for the settings rotation.
    init(_ combination: MatrixCombination) throws {
        self.combination = combination
        ring = TestKeyring(Array(repeating: combination.keyKind.sourceKind, count: 6), in: directory)
    }

    var format: MatrixFormat { combination.format }

    /// Key `number` (1-based) as the library takes it, with its format.
    func key(_ number: Int) -> DatabaseKey {
        let base = ring.keys[number - 1]
        if number == 1 && format == .legacy { return DatabaseKey(id: base.id, source: base.key.source, legacy: true) }
        return DatabaseKey(id: base.id, source: base.key.source, cipher: settings(number))
    }

    func settings(_ number: Int) -> CipherSettings { number == 6 ? format.exportTarget.settings : format.settings }

    /// The `sqlcipher` shell's lines that key a connection with key `number` in its format.
    func shellKeying(_ number: Int) -> String {
        var pragmas: [String] = []
        if number == 1 && format == .legacy {
            pragmas = ["PRAGMA cipher_compatibility = 2;", "PRAGMA kdf_iter = 4000;"]
        } else {
            let settings = settings(number)
            if let generation = settings.generation { pragmas.append("PRAGMA cipher_compatibility = \(generation.rawValue);") }
            if let kdf = settings.kdfIterations { pragmas.append("PRAGMA kdf_iter = \(kdf);") }
            if let pageSize = settings.pageSize { pragmas.append("PRAGMA cipher_page_size = \(pageSize);") }
        }
        let key = ring.keys[number - 1].shellKey.pragma
        guard !pragmas.isEmpty else { return key }
        // SQLCipher 4's shell may answer a cipher pragma with a row: keep the output to the queries.
        return SQLCipherShell.majorVersion >= 4
            ? key + "\n.output /dev/null\n" + pragmas.joined(separator: "\n") + "\n.output stdout"
            : key + "\n" + pragmas.joined(separator: "\n")
    }

    /// A key list of key `number` alone.
    func only(_ number: Int, database: String? = nil) throws -> KeyList {
        try KeyList(database: database ?? path, keys: [key(number)], environment: ring.environment)
    }

    /// The Keys file's list, read again on every call (the database follows it).
    var provider: @Sendable () throws -> KeyList {
        let (keysFile, path, environment) = (keysFile, path, ring.environment)
        return { try KeysFile.load(path: keysFile).keyList(forDatabase: path, environment: environment) }
    }

    func writeKeysFile(count: Int) throws {
        listed = count
        try Self.writeKeysFile(keysFile, database: "app.sqlite", entries: (1...count).map { (key($0), ring.keys[$0 - 1]) }, ring: ring)
    }

    /// Writes a Keys file with one entry: each key's source as `TestKeyring` writes it, plus its
    /// `cipher:` settings and `legacy:` flag.
    static func writeKeysFile(_ file: String, database: String, entries: [(DatabaseKey, TestKey)], ring: TestKeyring) throws {
        var text = TestKeyring.yamlEntry(path: database, plaintextID: nil, keys: entries.map(\.1))
        for (key, test) in entries {
            var extra: [String] = []
            if key.legacy { extra.append("        legacy: true") }
            var fields: [String] = []
            if let generation = key.cipher.generation { fields.append("compatibility: \(generation.rawValue)") }
            if let kdf = key.cipher.kdfIterations { fields.append("kdf_iter: \(kdf)") }
            if let pageSize = key.cipher.pageSize { fields.append("page_size: \(pageSize)") }
            if !fields.isEmpty { extra.append("        cipher: {\(fields.joined(separator: ", "))}") }
            guard !extra.isEmpty else { continue }
            let marker = "      - id: \"\(test.id)\"\n"
            guard let range = text.range(of: marker) else { throw FixtureError(message: "no entry for \(test.id)") }
            text.replaceSubrange(range, with: marker + extra.joined(separator: "\n") + "\n")
        }
        try ("databases:\n" + text).write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o600)
    }

    /// The user's file: the fixture (schema, rows, `user_version` 42, `application_id` 1234567)
    /// and an empty `notes` table, made by the `sqlcipher` shell with k1 in its format and journal mode.
    func makeFileWithShell() throws {
        let mode = combination.journal == .wal ? "PRAGMA journal_mode = WAL;\n" : ""
        let script = shellKeying(1) + "\n" + (SQLCipherShell.majorVersion >= 4 ? ".output /dev/null\n" + mode + ".output stdout\n" : mode)
            + Fixture.sql(rows: fixtureRows) + "\nCREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT NOT NULL);\n"
        let result = try SQLCipherShell.run(path, key: nil, script)
        guard result.status == 0 else { throw FixtureError(message: "sqlcipher shell could not make the file: \(result.stderr)") }
        let check = try SQLCipherShell.run(path, key: nil, shellKeying(1) + "\nPRAGMA journal_mode; PRAGMA page_size;")
        let expectedPageSize = format == .legacy ? 1024 : format.pageSize
        #expect(check.stdout == "\(combination.journal == .wal ? "wal" : "delete")\n\(expectedPageSize)\n", "the shell made the file as meant: \(check.stderr)")
    }

    // MARK: - The run

    func run() throws {
        try step("make the file (sqlcipher shell, oldest key k1)") { try makeFileWithShell() }
        try writeKeysFile(count: 3)
        let digest = try step("read the file with k1 alone") { try Fixture.digest(of: path, with: only(1)) }

        // Open: the file is on k1, the oldest of three keys; opening rotates it to k3.
        let options = OpenOptions(busyTimeout: .seconds(20), concurrentReaders: combination.readers.count)
        let database = try step("open (rotates k1 → k3)") { try EncryptedDatabase(path: path, keyProvider: provider, options: options) }
        #expect(database.report.openedWithKeyID == "k1")
        #expect(database.report.rotation?.toKeyID == "k3")
        #expect(database.report.rotation?.method == (format == .legacy ? .export : .pageReencryption), "open: \(String(describing: database.report.rotation))")
        try step("check the rotation on open") { try verifyOnKeyOnly(3, previous: 1, digest: digest, stage: "open", pageSize: format.pageSize) }
        let older = try step("the middle key k2 does not open the file") { try only(2) }
        #expect(throws: (any Error).self, "k2 never held the file") { _ = try EncryptedDatabase.check(path: path, keys: older) }

        try step("write") { try write(database, count: 20) }
        checkStep("read") { try readThrough(database, pageSize: format.pageSize) }

        // rotateToCurrentKey() after a key was appended: a key-only rotation, in place.
        try writeKeysFile(count: 4)
        let beforeExplicit = try step("digest before rotateToCurrentKey") { try database.write { try Fixture.contentDigest($0) } }
        let explicit = try step("rotateToCurrentKey (k3 → k4)") { try database.rotateToCurrentKey() }
        #expect(explicit?.toKeyID == "k4")
        #expect(explicit?.method == .pageReencryption || explicit?.method == .inPlace, "rotateToCurrentKey: \(String(describing: explicit))")
        try step("check rotateToCurrentKey") { try verifyOnKeyOnly(4, previous: 3, digest: beforeExplicit, stage: "rotateToCurrentKey", pageSize: format.pageSize) }
        try step("write after rotateToCurrentKey") { try write(database, count: 5) }
        checkStep("read after rotateToCurrentKey") { try readThrough(database, pageSize: format.pageSize) }

        try step("back up") { try backUp(database, keyNumber: 4, pageSize: format.pageSize, name: "backup-1.sqlite") }
        try step("health and status") { try health(keyNumber: 4, pageSize: format.pageSize) }

        // A rotation made by another process: `rekey` with the engine's rekey, from the Keys file
        // (environment keys in its environment), followed by the first database on its next
        // write and read.
        try writeKeysFile(count: 5)
        let beforeElsewhere = try step("digest before the rotation elsewhere") { try database.write { try Fixture.contentDigest($0) } }
        try step("rotate in another process (rekey --strategy engineRekey, k4 → k5)") {
            let environment = ProcessInfo.processInfo.environment.merging(ring.environment) { $1 }
            let result = try ProcessRunner.run(RekeyCLI.path, ["--db", path, "--keys", keysFile, "--strategy", "engineRekey", "--busy-timeout", "20"],
                                               environment: environment)
            #expect(result.status == 0, "rekey: \(result.stdout) \(result.stderr)")
            #expect(result.stdout.contains("k4") && result.stdout.contains("k5"), "rekey: \(result.stdout)")
        }
        try step("check the rotation elsewhere") { try verifyOnKeyOnly(5, previous: 4, digest: beforeElsewhere, stage: "elsewhere", pageSize: format.pageSize) }
        try step("write after the rotation elsewhere (follows it)") { try write(database, count: 3) }
        checkStep("read after the rotation elsewhere") { try readThrough(database, pageSize: format.pageSize) }
        #expect(database.keys.currentID == "k5")
        #expect(database.report.openedWithKeyID == "k5")

        // A settings rotation: the current key k6 has another format; the file is exported.
        try writeKeysFile(count: 6)
        let target = format.exportTarget
        let beforeExport = try step("digest before the export") { try database.write { try Fixture.contentDigest($0) } }
        let export = try step("rotateToCurrentKey to another format (k5 → k6, export)") { try database.rotateToCurrentKey() }
        #expect(export?.toKeyID == "k6")
        #expect(export?.method == .export, "export: \(String(describing: export))")
        try step("check the export") { try verifyOnKeyOnly(6, previous: 5, digest: beforeExport, stage: "export", pageSize: target.pageSize) }
        try step("write after the export") { try write(database, count: 2) }
        checkStep("read after the export") { try readThrough(database, pageSize: target.pageSize) }
        try step("back up after the export") { try backUp(database, keyNumber: 6, pageSize: target.pageSize, name: "backup-2.sqlite") }
        try step("health after the export") { try health(keyNumber: 6, pageSize: target.pageSize) }

        // Creation: a new file in this format, made by the library.
        if format != .legacy { try step("create a new file") { try create() } }
    }

    /// Runs `body`; an error is recorded as an issue naming the step and the combination, and the
    /// run goes on (a failing read through the pool must not hide what the later steps find).
    func checkStep(_ name: String, _ body: () throws -> Void) {
        do { try body() } catch { Issue.record(MatrixStepFailure(step: name, combination: combination.description, error: error)) }
    }

    /// Runs `body`; an error names the step and the combination.
    func step<T>(_ name: String, _ body: () throws -> T) throws -> T {
        do { return try body() } catch { throw MatrixStepFailure(step: name, combination: combination.description, error: error) }
    }

    // MARK: - Operations and checks

    /// `PRAGMA page_size` (SQLCipher 4 answers it as text, 3.4.1 as an integer).
    static func pageSize(_ db: Connection) throws -> Int? {
        let statement = try db.prepare("PRAGMA page_size")
        guard try statement.step() else { return nil }
        switch statement.value(at: 0) {
        case .integer(let value): return Int(value)
        case .text(let text): return Int(text)
        default: return nil
        }
    }

    func write(_ database: EncryptedDatabase, count: Int) throws {
        try database.write { db in
            for index in 0..<count { try db.execute("INSERT INTO notes(text) VALUES (?)", ["note \(notes + index)"]) }
        }
        notes += count
        #expect(try database.write { try $0.queryValue("SELECT count(*) FROM notes", as: Int.self) } == notes)
    }

    /// Several reads one after the other, eight at once beside a write, and with a pool two that
    /// overlap (which proves they run on pooled readers, not on the one writer).
    func readThrough(_ database: EncryptedDatabase, pageSize: Int) throws {
        for _ in 0..<3 {
            let (rows, notesRead, size) = try database.read { db in
                (try db.queryValue("SELECT count(*) FROM people", as: Int.self), try db.queryValue("SELECT count(*) FROM notes", as: Int.self),
                 try Self.pageSize(db))
            }
            #expect(rows == fixtureRows && notesRead == notes && size == pageSize, "read: \(rows) \(notesRead) \(String(describing: size))")
        }
        let failures = Locked<[String]>([])
        let expected = notes
        DispatchQueue.concurrentPerform(iterations: 9) { index in
            do {
                if index == 8 {
                    try database.write { db in try db.execute("INSERT INTO notes(text) VALUES ('concurrent')") }
                    return
                }
                let seen = try database.read { try $0.queryValue("SELECT count(*) FROM notes", as: Int.self) }
                if seen != expected && seen != expected + 1 { failures.withLock { $0.append("read \(seen ?? -1) notes, expected \(expected)") } }
            } catch {
                failures.withLock { $0.append("\(error)") }
            }
        }
        notes += 1
        #expect(failures.withLock { $0 }.isEmpty, "concurrent reads: \(failures.withLock { $0 })")
        guard combination.readers == .pool else { return }
        let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        let secondError = Locked<String?>(nil)
        OwnThread.start {
            do {
                try database.read { _ in
                    entered.signal()
                    _ = release.wait(timeout: .now() + 120)
                }
            } catch { secondError.withLock { $0 = "\(error)" } }
            done.signal()
        }
        let overlapped = try database.read { _ in
            let saw = entered.wait(timeout: .now() + 120) == .success
            release.signal()
            return saw
        }
        _ = done.wait(timeout: .now() + 120)
        #expect(overlapped, "two reads overlap on the pool")
        #expect(secondError.withLock { $0 } == nil, "\(secondError.withLock { $0 } ?? "")")
    }

    /// After a rotation to key `number`: the library opens the file with that key alone (content
    /// digest, rows, `user_version`, `application_id`, page size), not with key `previous`; the
    /// `sqlcipher` shell agrees.
    func verifyOnKeyOnly(_ number: Int, previous: Int, digest: String?, stage: String, pageSize: Int) throws {
        let newOnly = try only(number)
        let reader = try EncryptedDatabase(path: path, keys: newOnly, options: OpenOptions(rotateToCurrentKey: false))
        let (content, rows, notesRead, userVersion, applicationID, size) = try reader.read { db in
            (try Fixture.contentDigest(db), try db.queryValue("SELECT count(*) FROM people", as: Int.self),
             try db.queryValue("SELECT count(*) FROM notes", as: Int.self), try db.userVersion(), try db.applicationID(),
             try Self.pageSize(db))
        }
        if let digest { #expect(content == digest, "\(stage): content changed") }
        #expect(rows == fixtureRows && notesRead == notes, "\(stage): \(rows) people, \(notesRead) notes")
        #expect(userVersion == 42 && applicationID == 1_234_567, "\(stage): user_version \(userVersion), application_id \(applicationID)")
        #expect(size == pageSize, "\(stage): page size \(String(describing: size))")
        #expect(reader.report.openedWithKeyID == "k\(number)")
        #expect(throws: (any Error).self, "\(stage): the old key k\(previous) no longer opens the file") {
            _ = try EncryptedDatabase.check(path: path, keys: only(previous))
        }
        // The independent shell: the new key in its format opens it, intact; the old key does not.
        let shell = try SQLCipherShell.run(path, key: nil, shellKeying(number)
            + "\nPRAGMA integrity_check; PRAGMA user_version; PRAGMA application_id; SELECT count(*) FROM people; SELECT count(*) FROM notes; PRAGMA page_size;")
        #expect(shell.stdout == "ok\n42\n1234567\n\(fixtureRows)\n\(notes)\n\(pageSize)\n", "\(stage): shell with k\(number): \(shell.stdout) \(shell.stderr)")
        let old = try SQLCipherShell.run(path, key: nil, shellKeying(previous) + "\nSELECT count(*) FROM sqlite_master;")
        #expect(old.status != 0, "\(stage): the shell still opens the file with k\(previous)")
    }

    /// A backup: under the current key only, same content, `user_version`, `application_id`, in
    /// the current key's format.
    func backUp(_ database: EncryptedDatabase, keyNumber: Int, pageSize: Int, name: String) throws {
        let target = directory.file(name)
        let digest = try database.write { try Fixture.contentDigest($0) }
        let report = try database.backup(to: target)
        #expect(report.keyID == "k\(keyNumber)")
        #expect(report.userVersion == 42 && report.applicationID == 1_234_567)
        #expect(try Fixture.digest(of: target, with: only(keyNumber, database: target)) == digest, "backup content")
        #expect(throws: (any Error).self, "the backup is not on the previous key") {
            _ = try EncryptedDatabase.check(path: target, keys: only(keyNumber - 1, database: target))
        }
        let shell = try SQLCipherShell.run(target, key: nil, shellKeying(keyNumber) + "\nPRAGMA integrity_check; SELECT count(*) FROM notes; PRAGMA page_size;")
        #expect(shell.stdout == "ok\n\(notes)\n\(pageSize)\n", "backup with the shell: \(shell.stdout) \(shell.stderr)")
    }

    /// `DatabaseHealth`, `DatabaseInspection.state` and `EncryptedDatabase.check` on the Keys
    /// file's list: on key `number`, nothing to rotate, pages authenticated, the expected journal
    /// mode and page size.
    func health(keyNumber: Int, pageSize: Int) throws {
        let keys = try provider()
        let health = try DatabaseHealth.check(path: path, keys: keys)
        #expect(health.keyID == "k\(keyNumber)" && health.currentKeyID == "k\(keyNumber)" && !health.needsRotation)
        #expect(health.integrity == .ok, "health: \(health.integrity) \(health.integrityDetail ?? "") (\(health.integrityMethod))")
        #expect(health.journalMode == combination.expectedJournalMode, "health journal mode \(health.journalMode)")
        #expect(health.format.contains("page_size \(pageSize)"), "health format: \(health.format)")
        let state = try DatabaseInspection.state(path: path, keys: keys)
        #expect(state.openedWithKeyID == "k\(keyNumber)" && !state.needsRotation && state.rotationMethod == nil)
        #expect(state.pageSize == pageSize && state.userVersion == 42 && state.applicationID == 1_234_567, "state: \(state)")
        #expect(state.journalMode == combination.expectedJournalMode)
        let check = try EncryptedDatabase.check(path: path, keys: keys)
        #expect(check.openedWithKeyID == "k\(keyNumber)" && !check.needsRotation)
    }

    /// A new database made by the library with the format's current key (k2 alone): it opens in
    /// the shell with that key and format, and the pool (when there is one) reads it.
    func create() throws {
        let created = directory.file("created.sqlite")
        let keys = try only(2, database: created)
        let database = try EncryptedDatabase(path: created, keys: keys, options: OpenOptions(createIfMissing: true, concurrentReaders: combination.readers.count))
        #expect(database.report.created)
        try database.writeWithoutTransaction { db in
            if combination.journal == .wal { _ = try db.queryValue("PRAGMA journal_mode = WAL", as: String.self) }
            try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2), (3)")
        }
        #expect(try database.read { try $0.queryValue("SELECT count(*) FROM t", as: Int.self) } == 3)
        let shell = try SQLCipherShell.run(created, key: nil, shellKeying(2) + "\nPRAGMA integrity_check; SELECT count(*) FROM t; PRAGMA page_size; PRAGMA journal_mode;")
        #expect(shell.stdout == "ok\n3\n\(format.pageSize)\n\(combination.expectedJournalMode)\n", "created file with the shell: \(shell.stdout) \(shell.stderr)")
    }
}

/// A step of a matrix run failed: which step, on which combination, with which error.
struct MatrixStepFailure: Error, CustomStringConvertible {
    let step: String
    let combination: String
    let error: any Error
    var description: String { "step \"\(step)\" failed [\(combination)]: \(error)" }
}
