import EncryptedSQLite
import Foundation
import TestSupport

/// The fixture and the checker of the writer-kill trials (`WriterKillTests`), shared with their
/// control tests (`WriterKillCheckerControlTests`), so that the controls run exactly the trials' code.
struct WriterKillCheck {
    /// The key list old → new that opens the trial's file.
    let keys: KeyList
    /// The same keys for the independent shell.
    let oldShellKey: ShellKey
    let newShellKey: ShellKey
    /// ``bigTable(_:)`` of the fixture: the table no process writes during a trial.
    let baseline: String

    /// Creates the fixture at `path` with the old key: an empty `ledger` the writer process fills,
    /// and `rows` rows of 1000 random bytes in `big`, which nothing writes.
    static func makeFixture(at path: String, oldKeyHex: String, journalMode: String, rows: Int = 6000) throws {
        let oldOnly = try KeyList(database: path, keys: [DatabaseKey(id: "old", source: .hex(oldKeyHex))])
        let database = try EncryptedDatabase(path: path, keys: oldOnly, options: OpenOptions(createIfMissing: true))
        try database.writeWithoutTransaction { db in
            _ = try db.queryValue("PRAGMA journal_mode = \(journalMode)", as: String.self)
            try db.execute("""
                CREATE TABLE ledger(n INTEGER PRIMARY KEY, payload BLOB);
                CREATE TABLE big(id INTEGER PRIMARY KEY, payload BLOB);
                WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < \(rows))
                INSERT INTO big(payload) SELECT randomblob(1000) FROM n;
                """)
            if journalMode == "wal" { try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
        }
    }

    /// The shell on a copy, then the library: one of the keys opens the file, it is intact, the
    /// untouched table is as before, and every row the writer reported committed is there.
    func check(_ path: String, committed: Set<Int>, trial: String) throws -> CrashVerdict {
        var problems: [String] = []
        let copy = TemporaryDirectory("writer-copy")
        let folder = (path as NSString).deletingLastPathComponent
        for name in (try FileManager.default.contentsOfDirectory(atPath: folder)) where name.hasPrefix("app.sqlite") {
            try TestFiles.copy(folder + "/" + name, to: copy.file(name))
        }
        let shellOK = try SQLCipherShell.opens(copy.file("app.sqlite"), with: newShellKey) || (try SQLCipherShell.opens(copy.file("app.sqlite"), with: oldShellKey))
        if !shellOK { problems.append("\(trial): the sqlcipher shell opens the file with neither key") }
        do {
            let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(rotateToCurrentKey: false))
            guard try database.read({ try $0.queryValue("PRAGMA integrity_check", as: String.self) }) == "ok" else {
                problems.append("\(trial): integrity_check failed")
                return CrashVerdict(.unopenable, problems: problems)
            }
            let present = Set(try database.read { try $0.query("SELECT n FROM ledger").map { try $0.get(0, as: Int.self) } })
            let lost = committed.subtracting(present)
            let untouched = try Self.bigTable(database) == baseline
            if !lost.isEmpty || !untouched {
                problems.append("\(trial): \(lost.count) committed rows lost (\(lost.sorted().prefix(5))), or the untouched table changed (\(!untouched))")
                return CrashVerdict(.checksumMismatch, problems: problems)
            }
            return CrashVerdict(shellOK ? (database.report.openedWithKeyID == "new" ? .openedWithNew : .openedWithOld) : .unopenable, problems: problems)
        } catch {
            problems.append("\(trial): the library does not open the file: \(error)")
            return CrashVerdict(.unopenable, problems: problems)
        }
    }

    static func bigTable(_ path: String, _ keys: KeyList) throws -> String {
        try bigTable(EncryptedDatabase(path: path, keys: keys, options: OpenOptions(rotateToCurrentKey: false)))
    }

    /// Every row of `big`, in order: a change anywhere in the table shows.
    static func bigTable(_ database: EncryptedDatabase) throws -> String {
        try database.read { db in try Fixture.tableDigest(db, "big") }
    }
}
