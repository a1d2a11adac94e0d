import EncryptedSQLite
import Foundation
import Testing
import TestSupport

@Suite("kill -9 during a backup", .serialized, .ownThread)
struct BackupKillTests {
    static let seed = TestKnobs.seed("REKEY_KILL_SEED")
    static let trials = TestKnobs.count("REKEY_KILL_TRIALS", default: 12)

    @Test("`rekey backup` killed at random instants: the final name holds nothing or the complete backup (opens with the current key, same content), no file ever holds plaintext, and the next backup removes the dead one's temporary", arguments: [false, true])
    func killDuringBackup(walMode: Bool) throws {
        let folder = TemporaryDirectory("backup-kill")
        let hex = TestKeys.hex()
        _ = TestKeys.writeKeyFile(hex + "\n", in: folder, name: "k.key")
        let keysText = "databases:\n  - path: app.sqlite\n    keys:\n      - id: k\n        file: k.key\n        format: hex\n  - path: \"backups/*.sqlite\"\n    keys:\n      - id: k\n        file: k.key\n        format: hex\n"
        _ = FileManager.default.createFile(atPath: folder.file("Keys"), contents: Data(keysText.utf8), attributes: [.posixPermissions: 0o600])
        try FileManager.default.createDirectory(atPath: folder.file("backups"), withIntermediateDirectories: true)
        let database = folder.file("app.sqlite")
        let marker = "KILL-BACKUP-\(UUID().uuidString.prefix(8))"
        let keys = try KeyList(database: database, keys: [DatabaseKey(id: "k", source: .hex(hex))])
        do {
            let db = try EncryptedDatabase(path: database, keys: keys, options: OpenOptions(createIfMissing: true))
            try db.writeWithoutTransaction { db in
                if walMode { _ = try db.queryValue("PRAGMA journal_mode = WAL", as: String.self) }
                try db.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT); CREATE INDEX notes_body ON notes(body); PRAGMA user_version = 9; PRAGMA application_id = 77")
                try db.transaction(.immediate) { db in
                    let insert = try db.prepare("INSERT INTO notes(body) VALUES (?)")
                    for index in 0..<20_000 { try insert.execute(["\(marker) \(index) " + String(repeating: "secret text ", count: 20)]) }
                }
            }
        }
        let digest = try Fixture.digest(of: database, with: keys)
        let target = folder.file("backups/app.sqlite")
        let trial = KillTrial(executable: RekeyCLI.path, arguments: ["backup", "--db", "app.sqlite", "--to", "backups/app.sqlite"], environment: [:], directory: folder.path)

        let (full, wall) = try trial.uninterrupted()
        #expect(full.status == 0, "\(full.stderr)")
        try FileManager.default.removeItem(atPath: target)

        var random = SeededRandom(seed: Self.seed)
        var complete = 0, absent = 0, killedMidRun = 0
        for number in 1...Self.trials {
            if try trial.killed(after: KillTrial.instant(in: .zero...wall, random: &random)) { killedMidRun += 1 }
            if FileManager.default.fileExists(atPath: target) {
                complete += 1
                let backupKeys = try KeyList(database: target, keys: [DatabaseKey(id: "k", source: .hex(hex))])
                #expect(try Fixture.digest(of: target, with: backupKeys) == digest, "trial \(number): the backup under its final name is not complete")
                try FileManager.default.removeItem(atPath: target)
            } else {
                absent += 1
            }
            let leaks = Self.filesHolding(marker, under: folder.path)
            #expect(leaks.isEmpty, "trial \(number): plaintext on disk in \(leaks)")
        }
        // The next backup to the same name finishes, and removes what the killed ones left.
        let (last, _) = try trial.uninterrupted()
        #expect(last.status == 0, "\(last.stderr)")
        let leftovers = ((try? FileManager.default.contentsOfDirectory(atPath: folder.file("backups"))) ?? []).filter { $0 != "app.sqlite" && $0 != "app.sqlite-lock" }
        #expect(leftovers.isEmpty, "temporaries left: \(leftovers)")
        print("kill -9 during backup (\(walMode ? "WAL" : "rollback journal")): \(Self.trials) trials, \(killedMidRun) killed mid-run, \(complete) complete backups, \(absent) absent, uninterrupted \(Int(wall.seconds * 1000)) ms, seed \(Self.seed)")
        #expect(killedMidRun > 0)
    }

    /// Every file under `folder` that holds `marker`: the database, its side files, the backups and
    /// the hidden temporaries a killed backup left.
    static func filesHolding(_ marker: String, under folder: String) -> [String] {
        let needle = Data(marker.utf8)
        let enumerator = FileManager.default.enumerator(atPath: folder)
        var found: [String] = []
        while let name = enumerator?.nextObject() as? String {
            let path = folder + "/" + name
            if let data = TestFiles.contents(path), data.range(of: needle) != nil { found.append(name) }
        }
        return found
    }
}
