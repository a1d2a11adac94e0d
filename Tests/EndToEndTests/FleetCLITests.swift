import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// A tenant folder of small databases sharing one key list through a glob entry, with bad files
/// mixed in, plus one plaintext database listed by its exact path.
struct FleetFolder {
    let directory = TemporaryDirectory("fleet")
    let ring: TestKeyring
    let good: [String]
    let bad: [String: FileSnapshot]
    let mainPath: String

    /// 60 tenant files by default: enough for 2 workers, a run killed a third of the way and
    /// every kind of bad file. Each old file costs a key derivation per run, 0.1-0.9 s on
    /// SQLCipher 4, so 200 made this suite a tenth of the SQLCipher 4 run's processor time;
    /// REKEY_FLEET_FILES sets another size (Tests/README.md).
    static let goodCount = TestKnobs.count("REKEY_FLEET_FILES", default: 60)

    init() throws {
        ring = TestKeyring([.passphrase, .hex], in: directory)
        let tenants = directory.file("tenants")
        try FileManager.default.createDirectory(atPath: tenants, withIntermediateDirectories: true)
        let onOld = directory.file("template-old.sqlite")
        try Fixture.createWithShell(at: onOld, key: ring.keys[0].shellKey, rows: 20)
        let onCurrent = directory.file("template-current.sqlite")
        try Fixture.createWithShell(at: onCurrent, key: ring.keys[1].shellKey, rows: 20)
        var good: [String] = []
        for index in 0..<Self.goodCount {
            let path = tenants + String(format: "/tenant-%04d.sqlite", index)
            try TestFiles.copy(index % 40 == 7 ? onCurrent : onOld, to: path)
            good.append(path)
        }
        try FileManager.default.removeItem(atPath: onOld)
        try FileManager.default.removeItem(atPath: onCurrent)
        var bad: [String: FileSnapshot] = [:]
        func addBad(_ name: String, _ make: (String) throws -> Void) throws {
            let path = tenants + "/" + name
            try make(path)
            bad[path] = FileSnapshot(path)
        }
        for index in 0..<3 {
            try addBad("bad-random-\(index).sqlite") { _ = FileManager.default.createFile(atPath: $0, contents: Data((0..<8192).map { _ in UInt8.random(in: 0...255) })) }
        }
        try addBad("bad-empty.sqlite") { _ = FileManager.default.createFile(atPath: $0, contents: Data()) }
        try addBad("bad-plaintext.sqlite") { try SQLiteShell.createFixture(at: $0, rows: 5) }
        try addBad("bad-stranger.sqlite") { try Fixture.createWithShell(at: $0, key: .hex(TestKeys.hex()), rows: 5) }
        try addBad("bad-truncated.sqlite") { _ = FileManager.default.createFile(atPath: $0, contents: Data(repeating: 1, count: 100)) }
        self.good = good
        self.bad = bad
        mainPath = directory.file("main.sqlite")
        try SQLiteShell.createFixture(at: mainPath, rows: 30)

        let pattern = ring.yaml(databasePath: "tenants/*.sqlite").replacingOccurrences(of: "databases:\n", with: "")
        var mainEntry = TestKeyring.yamlEntry(path: "main.sqlite", plaintextID: "v0", keys: [ring.keys[1]])
        mainEntry += pattern
        _ = FileManager.default.createFile(atPath: directory.file("Keys"), contents: Data(("databases:\n" + mainEntry).utf8), attributes: [.posixPermissions: 0o600])
    }

    var currentCount: Int { good.indices.filter { $0 % 40 == 7 }.count }

    /// `rekey` in the fleet's folder. Its hang guard is 900 s: over 200 files (REKEY_FLEET_FILES), a run
    /// does 400 or more key derivations, and SQLCipher 4's cost 0.1-0.9 s each on a loaded 2-core machine (a
    /// CI run's 4.6.1 phase, beside a build, passed the default 300 s and was stopped as hung).
    func rekey(_ arguments: [String]) throws -> ProcessResult {
        try RekeyCLI.run(arguments, in: directory, environment: ring.environment, hangLimit: .seconds(900))
    }
}

@Suite("rekey over a fleet", .serialized, .ownThread)
struct FleetCLITests {
    @Test("--all over a fleet of tenant files (glob entry) plus a plaintext file, bad files mixed in: rotated, already current and failed counted, non-zero exit, bad files untouched, re-run skips")
    func fleet() throws {
        let fleet = try FleetFolder()
        let started = ContinuousClock.now
        let first = try fleet.rekey(["--all", "--jobs", "2", "--json"])
        let elapsed = ContinuousClock.now - started
        #expect(first.status == 65, "\(first.stderr)")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(first.stdout.utf8)) as? [String: Any])
        let summary = try #require(document["summary"] as? [String: Any])
        let rotatable = fleet.good.count - fleet.currentCount
        #expect(summary["total"] as? Int == fleet.good.count + fleet.bad.count + 1)
        #expect(summary["rotated"] as? Int == rotatable + 1)
        #expect(summary["alreadyCurrent"] as? Int == fleet.currentCount)
        #expect(summary["failed"] as? Int == fleet.bad.count)
        #expect(summary["jobs"] as? Int == 2)
        let databases = try #require(document["databases"] as? [[String: Any]])
        let failed = Set(databases.filter { $0["status"] as? String == "failed" }.compactMap { $0["path"] as? String })
        #expect(failed == Set(fleet.bad.keys))
        print("fleet: \(fleet.good.count) tenant files + 1 plaintext + \(fleet.bad.count) bad, --jobs 2: \(Int(elapsed.milliseconds)) ms wall clock (rekey's own total \(Int((summary["durationMs"] as? Double) ?? 0)) ms)")

        for (path, snapshot) in fleet.bad { #expect(FileSnapshot(path).bytes == snapshot.bytes, "\(path) changed") }
        for path in [fleet.good[0], fleet.good[fleet.good.count / 2], fleet.good[fleet.good.count - 1]] {
            #expect(try SQLCipherShell.opens(path, with: fleet.ring.keys[1].shellKey))
            #expect(try !SQLCipherShell.opens(path, with: fleet.ring.keys[0].shellKey))
        }
        #expect(try SQLCipherShell.opens(fleet.mainPath, with: fleet.ring.keys[1].shellKey))
        #expect(!fleet.directory.listing().contains { $0.hasSuffix(".rekey-export") })

        // Plain lines and a summary when not on a terminal; nothing left to rotate.
        let second = try fleet.rekey(["--all"])
        #expect(second.status == 65)
        let lines = second.stdout.split(separator: "\n")
        #expect(lines.filter { $0.contains("already on the current key") }.count == fleet.good.count + 1)
        #expect(second.stdout.contains("Summary: \(fleet.good.count + fleet.bad.count + 1) databases in "))
        #expect(second.stdout.contains(": 0 rotated, \(fleet.good.count + 1) already current, \(fleet.bad.count) failed"))
        #expect(second.stdout.contains("failed: \(fleet.directory.file("tenants/bad-plaintext.sqlite")): unencrypted, and its key list has no plaintext entry"))
    }

    @Test("a run killed part-way is finished by the next run, which skips the files already on the current key")
    func interruptedFleet() throws {
        let fleet = try FleetFolder()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: RekeyCLI.path)
        process.arguments = ["--all", "--jobs", "2"]
        process.currentDirectoryURL = URL(fileURLWithPath: fleet.directory.path)
        process.environment = ProcessRunner.withPATH(fleet.ring.environment)
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let child = ChildSignal(process)
        // Kill it once it has reported about a third of the files.
        var seen = Data()
        while process.isRunning {
            seen.append(output.fileHandleForReading.availableData)
            if seen.split(separator: UInt8(ascii: "\n")).count >= fleet.good.count / 3 { break }
        }
        child.send(SIGKILL)
        process.waitUntilExit()
        let doneBeforeKill = seen.split(separator: UInt8(ascii: "\n")).count

        let rerun = try fleet.rekey(["--all", "--jobs", "2", "--json"])
        let summary = try #require((try JSONSerialization.jsonObject(with: Data(rerun.stdout.utf8)) as? [String: Any])?["summary"] as? [String: Any])
        let rotated = summary["rotated"] as? Int ?? -1, current = summary["alreadyCurrent"] as? Int ?? -1
        #expect(rotated + current == fleet.good.count + 1)
        #expect(current >= fleet.currentCount + doneBeforeKill / 2, "killed after \(doneBeforeKill) lines; re-run found \(current) current")
        #expect(summary["failed"] as? Int == fleet.bad.count)
        print("fleet interrupted after \(doneBeforeKill) reported files; the re-run rotated \(rotated) and skipped \(current) already current")
        for path in fleet.good { #expect(DatabaseFileKind.inspect(path: path) != .missing) }
        #expect(!fleet.directory.listing().contains { $0.hasSuffix(".rekey-export") })
    }

    @Test("on a terminal, rekey shows a progress bar with files, bytes, rate and ETA")
    func progressBarOnTTY() throws {
        let fleet = try FleetFolder()
        let script = try #require(ProcessRunner.which("script"), "util-linux's script is needed to run rekey on a pseudo-terminal")
        let environment = ProcessRunner.withPATH(fleet.ring.environment)
        let command = "'\(RekeyCLI.path)' --all --jobs 2 --check"
        let result = try ProcessRunner.run(script, ["-qec", command, "/dev/null"], environment: environment, currentDirectory: fleet.directory.path)
        #expect(result.stdout.contains("files/s"))
        #expect(result.stdout.contains("MB/s"))
        #expect(result.stdout.contains("ETA"))
        #expect(result.stdout.contains("/\(fleet.good.count + fleet.bad.count + 1) files"))
        #expect(result.stdout.contains("Summary:"))
        // Without a terminal: no bar.
        let plain = try fleet.rekey(["--all", "--check"])
        #expect(!plain.stdout.contains("files/s") && !plain.stderr.contains("files/s"))
        #expect(plain.status == 65)
    }
}

@Suite("rekey status, dump and decrypt", .ownThread)
struct InspectCLITests {
    @Test("status reports the key and settings; dump prints SQL; decrypt needs --confirm-plaintext and never overwrites")
    func inspect() throws {
        let fixture = try CLIFixture()
        let before = FileSnapshot(fixture.path)
        let status = try fixture.rekey(["status", "--db", "app.sqlite"])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.hasPrefix("app.sqlite: key \"k1\", needs rotation to \"k3\" (page re-encryption), journal delete, "))
        // The shell wrote the file in its engine's default format: SQLCipher 3's or SQLCipher 4's.
        let onSQLCipher4 = SQLCipherEngine.linked.major >= 4
        #expect(status.stdout.contains(onSQLCipher4 ? "pages of 4096 bytes, kdf_iter 256000, hmac on" : "pages of 1024 bytes, kdf_iter 64000, hmac on"), "\(status.stdout)")
        let json = try fixture.rekey(["status", "--db", "app.sqlite", "--json"])
        let state = try #require(((try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])?["databases"] as? [[String: Any]])?.first)
        #expect(state["openedWithKeyID"] as? String == "k1")
        #expect(state["format"] as? String == (onSQLCipher4 ? "kdf_iter 256000 (sha512), page_size 4096, hmac sha512" : "kdf_iter 64000 (sha1), page_size 1024, hmac sha1"))

        let dump = try fixture.rekey(["dump", "--db", "app.sqlite"])
        #expect(dump.status == 0)
        #expect(dump.stdout.hasPrefix("PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\n"))
        #expect(dump.stdout.contains("INSERT INTO \"people\" VALUES(1,'person 1 é',0.5,"))

        let refused = try fixture.rekey(["decrypt", "--db", "app.sqlite", "--out", "plain.sqlite"])
        #expect(refused.status == 64)
        #expect(refused.stderr.contains("--confirm-plaintext"))
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.file("plain.sqlite")))
        let decrypted = try fixture.rekey(["decrypt", "--db", "app.sqlite", "--out", "plain.sqlite", "--confirm-plaintext"])
        #expect(decrypted.status == 0, "\(decrypted.stderr)")
        #expect(try SQLiteShell.run(fixture.directory.file("plain.sqlite"), "SELECT count(*) FROM people;").stdout == "50\n")
        let again = try fixture.rekey(["decrypt", "--db", "app.sqlite", "--out", "plain.sqlite", "--confirm-plaintext"])
        #expect(again.status == 73)
        #expect(FileSnapshot(fixture.path) == FileSnapshot(fixture.path))
        #expect(FileSnapshot(fixture.path).bytes == before.bytes)

        let secretArgument = try fixture.rekey(["dump", "--db", "app.sqlite", "--passphrase", "hunter2-secret"])
        #expect(secretArgument.status == 64)
        #expect(!secretArgument.stderr.contains("hunter2-secret"))
    }
}
