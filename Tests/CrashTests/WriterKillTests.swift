import EncryptedSQLite
import Foundation
import Synchronization
import Testing
import TestSupport

@Suite("A writer process while another process rotates", .serialized)
struct WriterKillTests {
    /// Trials per journal mode; raise with WRITER_KILL_TRIALS for stress runs.
    static let trials = Int(ProcessInfo.processInfo.environment["WRITER_KILL_TRIALS"] ?? "") ?? 8
    static let seed = UInt64(ProcessInfo.processInfo.environment["REKEY_KILL_SEED"] ?? "") ?? UInt64.random(in: 1...UInt64(UInt32.max))

    @Test("rekey killed at random instants while another process commits rows: every row the writer saw committed survives, and the file opens with one of the keys, intact",
          arguments: ["delete", "wal"])
    func writerDuringRotation(journalMode: String) throws {
        let directory = TemporaryDirectory("writer-kill")
        let (old, new) = (TestKeys.hex(), TestKeys.hex())
        let fixture = directory.file("fixture.sqlite")
        let oldOnly = try KeyList(database: fixture, keys: [DatabaseKey(id: "old", source: .hex(old))])
        do {
            let database = try EncryptedDatabase(path: fixture, keys: oldOnly, options: OpenOptions(createIfMissing: true))
            try database.writeWithoutTransaction { db in
                _ = try db.queryValue("PRAGMA journal_mode = \(journalMode)", as: String.self)
                try db.execute("""
                    CREATE TABLE ledger(n INTEGER PRIMARY KEY, payload BLOB);
                    CREATE TABLE big(id INTEGER PRIMARY KEY, payload BLOB);
                    WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 6000)
                    INSERT INTO big(payload) SELECT randomblob(1000) FROM n;
                    """)
                if journalMode == "wal" { try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
            }
        }
        let baseline = try Self.bigTable(fixture, oldOnly)

        let folder = TemporaryDirectory("writer-kill-trial")
        let path = folder.file("app.sqlite")
        _ = FileManager.default.createFile(atPath: folder.file("Keys"), contents: Data("""
            databases:
              - path: app.sqlite
                keys:
                  - id: old
                    hex: \(old)
                  - id: new
                    hex: \(new)
            """.utf8))
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "old", source: .hex(old)), DatabaseKey(id: "new", source: .hex(new))])
        let writer = KillTrial(executable: BuiltProduct.path("crash-harness"), arguments: ["write", path],
                               environment: ["HARNESS_OLD_KEY_HEX": old, "HARNESS_NEW_KEY_HEX": new], directory: folder.path)
        let rotator = KillTrial(executable: BuiltProduct.path("rekey"), arguments: ["--db", "app.sqlite", "--json"], environment: [:], directory: folder.path)

        // Calibrate: one uninterrupted rotation while the writer runs.
        try reset(path, from: fixture)
        var window: ClosedRange<Duration> = .zero ... .seconds(1)
        let calibration = try withWriter(writer) {
            let (result, wall) = try rotator.uninterrupted()
            #expect(result.status == 0, "\(result.stderr)")
            window = .zero...wall
        }
        #expect(calibration.count > 0)

        var random = SeededRandom(seed: Self.seed)
        var tally = CrashTally(path: "kill -9: rekey while another process writes (\(journalMode))")
        var rowsCommitted = 0
        for number in 1...Self.trials {
            try reset(path, from: fixture)
            let committed = try withWriter(writer) {
                try rotator.killed(after: KillTrial.instant(in: window, random: &random))
                sleep(for: .milliseconds(150))  // the writer goes on after the rotation
            }
            rowsCommitted += committed.count
            // WRITER_KILL_KEEP=<folder> keeps each trial's files, committed rows and keys for inspection.
            if let keep = ProcessInfo.processInfo.environment["WRITER_KILL_KEEP"] {
                let target = "\(keep)/trial-\(journalMode)-\(number)"
                try? FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
                for name in folder.listing() { try? FileManager.default.copyItem(atPath: folder.file(name), toPath: target + "/" + name) }
                try? committed.sorted().map(String.init).joined(separator: "\n").write(toFile: target + "/committed.txt", atomically: true, encoding: .utf8)
                try? "\(old)\n\(new)\n".write(toFile: target + "/keys.txt", atomically: true, encoding: .utf8)
            }
            tally.record(try check(path, keys: keys, shell: (.hex(old), .hex(new)), committed: committed, baseline: baseline, trial: "trial \(number)"))
        }
        print(tally.row)
        print("\(tally); \(rowsCommitted) rows reported committed by the writer in all, uninterrupted rotation \(Int(window.upperBound.seconds * 1000)) ms, seed \(Self.seed)")
        #expect(tally.unopenable == 0)
        #expect(tally.checksumMismatches == 0)
    }

    /// Runs `body` while a writer process commits rows; kills the writer afterwards and returns the
    /// row numbers it reported committed.
    private func withWriter(_ writer: KillTrial, _ body: () throws -> Void) throws -> Set<Int> {
        let pipe = Pipe()
        let process = writer.start(output: pipe.fileHandleForWriting)
        try process.run()
        try pipe.fileHandleForWriting.close()
        let lines = Mutex<[Substring]>([])
        let reader = Thread {
            let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            lines.withLock { $0 = text.split(separator: "\n") }
        }
        reader.start()
        // Let it commit a few rows before the rotation starts.
        sleep(for: .milliseconds(200))
        let failure = Result { try body() }
        // Killed exactly once, and only while it is ours (a reaped PID can be reused).
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        while !reader.isFinished { usleep(1000) }
        try failure.get()
        return Set(lines.withLock { $0 }.compactMap { line in line.hasPrefix("committed ") ? Int(line.dropFirst(10)) : nil })
    }

    /// The shell on a copy, then the library: one of the keys opens the file, it is intact, the
    /// untouched table is as before, and every row the writer reported committed is there.
    private func check(_ path: String, keys: KeyList, shell: (old: ShellKey, new: ShellKey), committed: Set<Int>, baseline: String, trial: String) throws -> CrashOutcome {
        let copy = TemporaryDirectory("writer-copy")
        let folder = (path as NSString).deletingLastPathComponent
        for name in (try FileManager.default.contentsOfDirectory(atPath: folder)) where name.hasPrefix("app.sqlite") {
            try FileManager.default.copyItem(atPath: folder + "/" + name, toPath: copy.file(name))
        }
        let shellOK = try SQLCipherShell.opens(copy.file("app.sqlite"), with: shell.new) || (try SQLCipherShell.opens(copy.file("app.sqlite"), with: shell.old))
        if !shellOK { Issue.record("\(trial): the sqlcipher shell opens the file with neither key") }
        do {
            let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(rotateToCurrentKey: false))
            guard try database.read({ try $0.queryValue("PRAGMA integrity_check", as: String.self) }) == "ok" else {
                Issue.record("\(trial): integrity_check failed")
                return .unopenable
            }
            let present = Set(try database.read { try $0.query("SELECT n FROM ledger").map { try $0.get(0, as: Int.self) } })
            let lost = committed.subtracting(present)
            let untouched = try Self.bigTable(database) == baseline
            if !lost.isEmpty || !untouched {
                Issue.record("\(trial): \(lost.count) committed rows lost (\(lost.sorted().prefix(5))), or the untouched table changed")
                return .checksumMismatch
            }
            return shellOK ? (database.report.openedWithKeyID == "new" ? .openedWithNew : .openedWithOld) : .unopenable
        } catch {
            Issue.record("\(trial): \(error)")
            return .unopenable
        }
    }

    private func reset(_ path: String, from fixture: String) throws {
        for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        let folder = (path as NSString).deletingLastPathComponent
        for name in (try FileManager.default.contentsOfDirectory(atPath: folder)) where name.hasPrefix(".app.sqlite.") {
            try FileManager.default.removeItem(atPath: folder + "/" + name)
        }
        try FileManager.default.copyItem(atPath: fixture, toPath: path)
    }

    private static func bigTable(_ path: String, _ keys: KeyList) throws -> String {
        try bigTable(EncryptedDatabase(path: path, keys: keys, options: OpenOptions(rotateToCurrentKey: false)))
    }

    private static func bigTable(_ database: EncryptedDatabase) throws -> String {
        try database.read { db in
            let row = try db.queryOne("SELECT count(*), total(length(payload)), hex(substr(group_concat(hex(substr(payload, 1, 4))), 1, 64)) FROM big")
            return row?.description ?? ""
        }
    }
}
