import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// Outcomes of kill -9 trials on one rotation path.
struct KillTally: CustomStringConvertible {
    var trials = 0
    var killedWhileRunning = 0
    var openedWithOld = 0
    var openedWithNew = 0
    var unopenable = 0
    var checksumMismatches = 0
    var integrityFailures = 0

    var description: String {
        "\(trials) trials (\(killedWhileRunning) killed mid-run): opened with old key \(openedWithOld), with new key \(openedWithNew), unopenable \(unopenable), checksum mismatches \(checksumMismatches), integrity failures \(integrityFailures)"
    }
}

@Suite("kill -9 during rotation", .serialized)
struct KillTests {
    /// Trials per journal mode; raise with REKEY_KILL_TRIALS for stress runs.
    static let trials = Int(ProcessInfo.processInfo.environment["REKEY_KILL_TRIALS"] ?? "") ?? 20
    /// Rows of 1000 random bytes: about 33 MB with 1 KiB pages.
    static let rows = Int(ProcessInfo.processInfo.environment["REKEY_KILL_ROWS"] ?? "") ?? 30_000

    @Test("the rekey process killed at random instants leaves a file that opens with the old or the new key, intact",
          arguments: ["delete", "wal"])
    func killDuringRotation(journalMode: String) throws {
        let directory = TemporaryDirectory("kill-\(journalMode)")
        let ring = TestKeyring([.passphrase, .hex], in: directory)
        let keysYAML = ring.yaml(databasePath: "app.sqlite")
        let fixture = directory.file("fixture.sqlite")
        let oldKeys = try ring.only(0, database: fixture)
        do {
            let database = try EncryptedDatabase(path: fixture, keys: oldKeys, options: OpenOptions(createIfMissing: true))
            try database.writeWithoutTransaction { db in
                _ = try db.queryValue("PRAGMA journal_mode = \(journalMode)", as: String.self)
                try db.execute("""
                    CREATE TABLE big(id INTEGER PRIMARY KEY, tag TEXT, payload BLOB);
                    CREATE INDEX big_tag ON big(tag);
                    PRAGMA user_version = 9;
                    """)
                try db.execute("""
                    WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < ?)
                    INSERT INTO big(tag, payload) SELECT 'tag' || (x % 97), randomblob(1000) FROM n
                    """, [Self.rows])
                if journalMode == "wal" { try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
            }
        }
        let expected = try digest(fixture, keys: oldKeys)
        let trialFolder = TemporaryDirectory("kill-trial")
        _ = FileManager.default.createFile(atPath: trialFolder.file("Keys"), contents: Data(keysYAML.utf8))
        let path = trialFolder.file("app.sqlite")

        // Calibrate: how long an uninterrupted run takes (it must succeed).
        try reset(path, from: fixture)
        let stopwatch = ContinuousClock.now
        let full = try RekeyCLI.run(["--db", "app.sqlite"], in: trialFolder, environment: ring.environment)
        let runTime = ContinuousClock.now - stopwatch
        #expect(full.status == 0, "\(full.stderr)")

        var tally = KillTally()
        for _ in 0..<Self.trials {
            try reset(path, from: fixture)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: RekeyCLI.path)
            process.arguments = ["--db", "app.sqlite"]
            process.currentDirectoryURL = URL(fileURLWithPath: trialFolder.path)
            process.environment = ring.environment
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let delay = Double.random(in: 0...1) * Double(runTime.components.seconds * 1_000_000 + runTime.components.attoseconds / 1_000_000_000_000)
            usleep(useconds_t(delay))
            if process.isRunning { tally.killedWhileRunning += 1 }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            tally.trials += 1

            // What a user would do next: open it with the key list (this recovers a hot journal).
            do {
                let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: OpenOptions(rotateToCurrentKey: false))
                let opened = database.report.openedWithKeyID
                if opened == "k1" { tally.openedWithOld += 1 } else { tally.openedWithNew += 1 }
                let integrity = try database.read { try $0.queryValue("PRAGMA integrity_check", as: String.self) }
                if integrity != "ok" { tally.integrityFailures += 1 }
                if try database.read({ try Fixture.contentDigest($0) }) != expected { tally.checksumMismatches += 1 }
                let shellKey = opened == "k1" ? ring.keys[0].shellKey : ring.keys[1].shellKey
                if try !SQLCipherShell.opens(path, with: shellKey) { tally.integrityFailures += 1 }
            } catch {
                tally.unopenable += 1
                Issue.record("trial \(tally.trials): \(error)")
            }
        }
        print("kill -9 during rotation [\(journalMode)], uninterrupted run \(Int(runTime.milliseconds)) ms: \(tally)")
        #expect(tally.trials == Self.trials)
        #expect(tally.unopenable == 0)
        #expect(tally.checksumMismatches == 0)
        #expect(tally.integrityFailures == 0)
        #expect(tally.openedWithOld + tally.openedWithNew == tally.trials)
    }

    @Test("rekey killed at random instants while it encrypts a plaintext file: always the original plaintext file or the complete encrypted one, and no temporary survives the next run")
    func killDuringPlaintextEncryption() throws {
        let directory = TemporaryDirectory("kill-plain")
        let ring = TestKeyring([.passphrase, .hex], in: directory, plaintextID: "v0")
        let fixture = directory.file("fixture.sqlite")
        let rows = Self.rows / 2
        let made = try SQLiteShell.run(fixture, """
            CREATE TABLE big(id INTEGER PRIMARY KEY, tag TEXT, payload BLOB);
            CREATE INDEX big_tag ON big(tag);
            PRAGMA user_version = 9;
            PRAGMA application_id = 77;
            WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < \(rows))
            INSERT INTO big(tag, payload) SELECT 'tag' || (x % 97), randomblob(1000) FROM n;
            """)
        #expect(made.status == 0, "\(made.stderr)")
        let plaintextOnly = try KeyList(database: fixture, keys: [.plaintext(id: "v0"), DatabaseKey(id: "unused", source: .hex(TestKeys.hex()))])
        let expected = try digest(fixture, keys: plaintextOnly)
        let fixtureBytes = try Data(contentsOf: URL(fileURLWithPath: fixture))

        let trialFolder = TemporaryDirectory("kill-plain-trial")
        _ = FileManager.default.createFile(atPath: trialFolder.file("Keys"), contents: Data(ring.yaml(databasePath: "app.sqlite").utf8))
        let path = trialFolder.file("app.sqlite")
        let keys = try ring.keyList(database: path)

        try reset(path, from: fixture)
        let stopwatch = ContinuousClock.now
        let full = try RekeyCLI.run(["--db", "app.sqlite"], in: trialFolder, environment: ring.environment)
        let runTime = ContinuousClock.now - stopwatch
        #expect(full.status == 0, "\(full.stderr)")

        var tally = KillTally()
        var leftTemporaries = 0, strayAfterNextRun = 0, plaintextIntact = 0
        for _ in 0..<Self.trials {
            try reset(path, from: fixture)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: RekeyCLI.path)
            process.arguments = ["--db", "app.sqlite"]
            process.currentDirectoryURL = URL(fileURLWithPath: trialFolder.path)
            process.environment = ring.environment
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let delay = Double.random(in: 0.3...1.2) * Double(runTime.components.seconds * 1_000_000 + runTime.components.attoseconds / 1_000_000_000_000)
            usleep(useconds_t(delay))
            if process.isRunning { tally.killedWhileRunning += 1 }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            tally.trials += 1
            if trialFolder.listing().contains(where: { $0.hasSuffix(".rekey-export") }) { leftTemporaries += 1 }

            // Right after the kill, before anything else touches it: one of the two complete files.
            switch DatabaseFileKind.inspect(path: path) {
            case .plaintextSQLite:
                tally.openedWithOld += 1
                if (try? Data(contentsOf: URL(fileURLWithPath: path))) == fixtureBytes { plaintextIntact += 1 }
                if try digest(path, keys: plaintextOnly) != expected { tally.checksumMismatches += 1 }
            case .opaque:
                tally.openedWithNew += 1
                if try !SQLCipherShell.opens(path, with: ring.keys[1].shellKey) { tally.integrityFailures += 1 }
                if try digest(path, keys: ring.only(1, database: path)) != expected { tally.checksumMismatches += 1 }
            default:
                tally.unopenable += 1
            }
            // The next run finishes the job and leaves nothing behind.
            do {
                let database = try EncryptedDatabase(path: path, keys: keys)
                #expect(database.report.isOnCurrentKey)
                if try database.read({ try Fixture.contentDigest($0) }) != expected { tally.checksumMismatches += 1 }
            } catch {
                tally.unopenable += 1
                Issue.record("trial \(tally.trials): \(error)")
            }
            if trialFolder.listing().contains(where: { $0.hasPrefix(".app.sqlite.") || $0.hasSuffix("-journal") }) { strayAfterNextRun += 1 }
        }
        print("kill -9 during plaintext encryption, uninterrupted run \(Int(runTime.milliseconds)) ms: \(tally); original bytes intact in \(plaintextIntact) of \(tally.openedWithOld) plaintext outcomes; temporaries left by the kill \(leftTemporaries), left after the next run \(strayAfterNextRun)")
        #expect(tally.trials == Self.trials)
        #expect(tally.unopenable == 0)
        #expect(tally.checksumMismatches == 0)
        #expect(tally.integrityFailures == 0)
        #expect(plaintextIntact == tally.openedWithOld)
        #expect(strayAfterNextRun == 0)
    }

    private func reset(_ path: String, from fixture: String) throws {
        for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        let folder = (path as NSString).deletingLastPathComponent
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] where name.hasSuffix(".rekey-export") || name.contains(".rekey-export-") {
            try? FileManager.default.removeItem(atPath: folder + "/" + name)
        }
        try FileManager.default.copyItem(atPath: fixture, toPath: path)
    }

    private func digest(_ path: String, keys: KeyList) throws -> String {
        let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(rotateToCurrentKey: false))
        return try database.read { try Fixture.contentDigest($0) }
    }
}
