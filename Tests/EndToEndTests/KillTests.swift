import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// One rotation path of the `rekey` CLI, set up for kill -9 trials.
struct KillPath: CustomTestStringConvertible, Sendable {
    enum Kind: String, Sendable {
        case pageReencryption, pageReencryptionWAL, engineRekey, engineRekeyWAL, plaintextExport, settingsExport
        /// A 3.x-format file whose current key has no settings, on SQLCipher 4: the export to 4.x.
        case upgradeExport
    }

    let kind: Kind

    /// Every path; the 3.x → 4.x export only where the linked engine writes 4.x by default.
    static let all: [KillPath] = ([.pageReencryption, .pageReencryptionWAL, .engineRekey, .engineRekeyWAL, .plaintextExport, .settingsExport]
        + (SQLCipherEngine.linked.major >= 4 ? [.upgradeExport] : [])).map(KillPath.init)

    var testDescription: String {
        switch kind {
        case .pageReencryption: "page re-encryption, rollback-journal file"
        case .pageReencryptionWAL: "page re-encryption, WAL file"
        case .engineRekey: "engine rekey (--strategy engineRekey), rollback-journal file"
        case .engineRekeyWAL: "engine rekey (--strategy engineRekey), WAL file"
        case .plaintextExport: "export + swap: plaintext to encrypted"
        case .settingsExport: "export + swap: new cipher settings"
        case .upgradeExport: "export + swap: 3.x file to 4.x (current key without settings)"
        }
    }

    /// Whether the shell reads and writes the old key's file in the 3.x format.
    var oldIsVersion3: Bool { kind == .upgradeExport }

    var isDefaultRotation: Bool { kind == .pageReencryption || kind == .pageReencryptionWAL }
    var walMode: Bool { kind == .pageReencryptionWAL || kind == .engineRekeyWAL }

    /// Trials: REKEY_KILL_TRIALS for every path, else 20 for the default rotation and 10 for the others.
    var trials: Int {
        TestKnobs.count("REKEY_KILL_TRIALS", default: isDefaultRotation ? 20 : 10)
    }

    /// Rows of 1000 random bytes: about 22 MB for the default rotation, 9 MB for the others
    /// (REKEY_KILL_ROWS overrides).
    var rows: Int {
        TestKnobs.count("REKEY_KILL_ROWS", default: isDefaultRotation ? 20_000 : 8_000)
    }
}

/// The paths run at once, each in folders of its own: one after another they were the longest
/// chain of a SQLCipher 4.6.1 run (590 s of its 590), with a core idle at the end.
@Suite("kill -9 during rotation", .ownThread)
struct KillTests {
    static let seed = TestKnobs.seed("REKEY_KILL_SEED")

    @Test("the rekey process killed at random instants leaves the old file or the complete new one: the sqlcipher shell and the library open it with one of the keys, intact, and the next run finishes the job and leaves nothing behind",
          arguments: KillPath.all)
    func killDuringRotation(_ path: KillPath) throws {
        let setup = try KillSetup(path)
        let trialFolder = TemporaryDirectory("kill-trial")
        try setup.writeKeysFile(into: trialFolder)
        let database = trialFolder.file("app.sqlite")
        var arguments = ["--db", "app.sqlite", "--json"]
        if path.kind == .engineRekey || path.kind == .engineRekeyWAL { arguments += ["--strategy", "engineRekey"] }
        let trial = KillTrial(executable: RekeyCLI.path, arguments: arguments, environment: setup.ring.environment, directory: trialFolder.path)

        // Calibrate: an uninterrupted run must succeed, with the expected method; its report
        // tells when the rotation starts, so that most kills land inside it.
        try setup.reset(database)
        let (full, wall) = try trial.uninterrupted()
        #expect(full.status == 0, "\(full.stderr)")
        let rotation = try Self.rotation(in: full.stdout)
        #expect(rotation.method == setup.expectedMethod, "\(full.stdout)")
        let window = max(.zero, wall - .milliseconds(Int64(rotation.totalMs * 1.25)))...wall

        var random = SeededRandom(seed: Self.seed)
        var tally = CrashTally(path: "kill -9: \(path.testDescription)")
        var killedMidRun = 0
        for number in 1...path.trials {
            try setup.reset(database)
            if try trial.killed(after: KillTrial.instant(in: window, random: &random)) { killedMidRun += 1 }
            let verdict = try setup.check(database, in: trialFolder, trial: "trial \(number)")
            for problem in verdict.problems { Issue.record("\(problem)") }
            tally.record(verdict.outcome)
        }
        print(tally.row)
        print("\(tally); uninterrupted run \(Int(wall.seconds * 1000)) ms (rotation \(Int(rotation.totalMs)) ms), \(killedMidRun) killed mid-run, seed \(Self.seed)")
        #expect(tally.trials == path.trials)
        #expect(tally.unopenable == 0)
        #expect(tally.checksumMismatches == 0)
    }

    struct RotationJSON: Decodable {
        let method: String
        let totalMs: Double
    }

    static func rotation(in json: String) throws -> RotationJSON {
        struct Document: Decodable { let databases: [Entry] }
        struct Entry: Decodable { let rotation: RotationJSON? }
        let document = try JSONDecoder().decode(Document.self, from: Data(json.utf8))
        return try #require(document.databases.first?.rotation)
    }
}

/// The fixture, keys and checks of one kill path.
struct KillSetup {
    let path: KillPath
    let fixture: TemporaryDirectory
    let ring: TestKeyring
    let expected: String
    let newSettings: CipherSettings

    /// The fixture of `path`, with `rows` rows instead of the path's own number when given.
    init(_ path: KillPath, rows: Int? = nil) throws {
        self.path = path
        fixture = TemporaryDirectory("kill-fixture")
        let plaintext = path.kind == .plaintextExport
        ring = TestKeyring([.passphrase, .hex], in: fixture, plaintextID: plaintext ? "v0" : nil)
        newSettings = path.kind == .settingsExport ? CipherSettings(kdfIterations: 10_000, pageSize: 4096) : .engineDefault
        let file = fixture.file("app.sqlite")
        let content = """
            CREATE TABLE big(id INTEGER PRIMARY KEY, tag TEXT, payload BLOB);
            CREATE INDEX big_tag ON big(tag);
            PRAGMA user_version = 9;
            PRAGMA application_id = 77;
            WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < \(rows ?? path.rows))
            INSERT INTO big(tag, payload) SELECT 'tag' || (x % 97), randomblob(1000) FROM n;
            """
        if plaintext {
            let made = try SQLiteShell.run(file, content)
            #expect(made.status == 0, "\(made.stderr)")
            expected = try Self.digest(file, KeyList(database: file, keys: [.plaintext(id: "v0"), DatabaseKey(id: "unused", source: .hex(TestKeys.hex()))]))
        } else {
            let mode = path.walMode ? "PRAGMA journal_mode = WAL;\n" : ""
            let made = try SQLCipherShell.run(file, key: ring.keys[0].shellKey, version3: path.oldIsVersion3, mode + content + (path.walMode ? "\nPRAGMA wal_checkpoint(TRUNCATE);" : ""))
            #expect(made.status == 0, "\(made.stderr)")
            expected = try Self.digest(file, ring.only(0, database: file))
        }
    }

    var expectedMethod: String {
        switch path.kind {
        case .pageReencryption, .pageReencryptionWAL: RotationMethod.pageReencryption.rawValue
        case .engineRekey, .engineRekeyWAL: RotationMethod.inPlace.rawValue
        case .plaintextExport, .settingsExport, .upgradeExport: RotationMethod.export.rawValue
        }
    }

    /// The Keys file for `app.sqlite` in `folder` (with the new key's cipher settings).
    func writeKeysFile(into folder: TemporaryDirectory) throws {
        var yaml = ring.yaml(databasePath: "app.sqlite")
        if path.kind == .settingsExport {
            yaml += "        cipher: {kdf_iter: 10000, page_size: 4096}\n"
        }
        _ = FileManager.default.createFile(atPath: folder.file("Keys"), contents: Data(yaml.utf8), attributes: [.posixPermissions: 0o600])
    }

    /// The key list the library uses to check a trial's result.
    func keys(at file: String) throws -> KeyList {
        var keys: [DatabaseKey] = path.kind == .plaintextExport ? [.plaintext(id: "v0")] : [ring.keys[0].key]
        if path.kind == .plaintextExport { keys.append(ring.keys[0].key) }
        let new = ring.keys[1].key
        keys.append(DatabaseKey(id: new.id, source: new.source, cipher: newSettings))
        return try KeyList(database: file, keys: keys, environment: ring.environment)
    }

    /// Puts a fresh copy of the fixture at `file`, with no side files or temporaries.
    func reset(_ file: String) throws {
        let folder = (file as NSString).deletingLastPathComponent
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        where name.hasPrefix("app.sqlite") || name.hasPrefix(".app.sqlite.") {
            try FileManager.default.removeItem(atPath: folder + "/" + name)
        }
        try TestFiles.copy(fixture.file("app.sqlite"), to: file)
    }

    /// What a user checks after the kill: the independent shell on a copy of exactly what the kill
    /// left (it rolls back a hot journal itself), then the library, then a next run that must
    /// finish the rotation and leave nothing behind. The trials and `KillCheckerControlTests` both
    /// call it.
    func check(_ file: String, in folder: TemporaryDirectory, trial: String) throws -> CrashVerdict {
        var problems: [String] = []
        let copy = TemporaryDirectory("kill-copy")
        for name in folder.listing() where name.hasPrefix("app.sqlite") || name.hasPrefix(".app.sqlite.") {
            try TestFiles.copy(folder.file(name), to: copy.file(name))
        }
        let newShell = ring.keys[1].shellKey.pragma + (path.kind == .settingsExport ? "\nPRAGMA kdf_iter = 10000;\nPRAGMA cipher_page_size = 4096;" : "")
        let byNew = try SQLCipherShell.run(copy.file("app.sqlite"), key: nil, newShell + "\nPRAGMA integrity_check;")
        let byOld = path.kind == .plaintextExport
            ? try SQLiteShell.run(copy.file("app.sqlite"), "PRAGMA integrity_check;")
            : try SQLCipherShell.run(copy.file("app.sqlite"), key: ring.keys[0].shellKey, version3: path.oldIsVersion3, "PRAGMA integrity_check;")
        let shellOK = [byNew, byOld].contains { $0.status == 0 && $0.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "ok" }
        if !shellOK { problems.append("\(trial): the sqlcipher shell opens the file with neither key: \(byNew.stderr) | \(byOld.stderr)") }

        let outcome: CrashOutcome
        do {
            let database = try EncryptedDatabase(path: file, keys: keys(at: file), options: OpenOptions(rotateToCurrentKey: false))
            let integrity = try database.read { try $0.queryValue("PRAGMA integrity_check", as: String.self) }
            if integrity != "ok" {
                problems.append("\(trial): integrity_check: \(integrity ?? "nil")")
                outcome = .unopenable
            } else if try database.read({ try Fixture.contentDigest($0) }) != expected {
                problems.append("\(trial): the content changed")
                outcome = .checksumMismatch
            } else {
                outcome = database.report.openedWithKeyID == ring.keys[1].id ? .openedWithNew : .openedWithOld
            }
        } catch {
            problems.append("\(trial): the library does not open the file: \(error)")
            return CrashVerdict(.unopenable, problems: problems)
        }
        // The next run finishes the job and leaves no temporary, journal or undo file.
        do {
            let database = try EncryptedDatabase(path: file, keys: keys(at: file))
            if !database.report.isOnCurrentKey { problems.append("\(trial): the next run left the file on key \(database.report.openedWithKeyID)") }
            if try database.read({ try Fixture.contentDigest($0) }) != expected {
                problems.append("\(trial): the content changed after the next run")
                return CrashVerdict(.checksumMismatch, problems: problems)
            }
        }
        let stray = folder.listing().filter { $0.hasPrefix(".app.sqlite.") || $0.hasSuffix("-journal") || $0.hasSuffix("-wal") || $0.hasSuffix("-shm") }
        if !stray.isEmpty { problems.append("\(trial): left behind after the next run: \(stray)") }
        return CrashVerdict(shellOK ? outcome : .unopenable, problems: problems)
    }

    static func digest(_ file: String, _ keys: KeyList) throws -> String {
        let database = try EncryptedDatabase(path: file, keys: keys, options: OpenOptions(rotateToCurrentKey: false))
        return try database.read { try Fixture.contentDigest($0) }
    }
}
