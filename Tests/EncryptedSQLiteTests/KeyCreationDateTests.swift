@testable import EncryptedSQLite
import Foundation
import KeyConfiguration
import Logging
import Testing
import TestSupport

/// `created:` dates on keys: written in the Keys file or given in code, a list that is not oldest
/// first is refused (it would rotate files backwards), and a rotation to an older key is a warning.
@Suite("Key creation dates")
struct KeyCreationDateTests {
    let directory = TemporaryDirectory("created")
    var db: String { directory.file("app.sqlite") }

    /// The start of a day in UTC.
    static func day(_ text: String) -> Date { KeyCreationDate.parse(text)! }

    /// The ring's key `index` with a creation date.
    static func dated(_ ring: TestKeyring, _ index: Int, _ created: String?) -> DatabaseKey {
        DatabaseKey(id: ring.keys[index].id, source: ring.keys[index].key.source, created: created.map(day))
    }

    func writeKeys(_ entries: [(id: String, hex: String, created: String?)]) -> String {
        var text = "databases:\n  - path: app.sqlite\n    keys:\n"
        for entry in entries {
            text += "      - id: \"\(entry.id)\"\n        hex: \(entry.hex)\n"
            if let created = entry.created { text += "        created: \(created)\n" }
        }
        let path = directory.file("Keys")
        _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        return path
    }

    @Test("created: in the Keys file is the start of that day (UTC); a list in date order, undated keys anywhere, builds")
    func datesLoad() throws {
        let path = writeKeys([("2024-01", TestKeys.hex(), "2024-01-15"), ("undated", TestKeys.hex(), nil), ("2025-06", TestKeys.hex(), "2025-06-01"), ("same-day", TestKeys.hex(), "2025-06-01")])
        let file = try KeysFile.load(path: path)
        let keys = file.entries[0].keys
        #expect(keys.map(\.created) == [Date(timeIntervalSince1970: 1_705_276_800), nil, Date(timeIntervalSince1970: 1_748_736_000), Date(timeIntervalSince1970: 1_748_736_000)])
        #expect(keys[0].description.hasSuffix(", created: 2024-01-15)"))
        #expect(try file.keyList(forDatabase: db, environment: [:]).currentID == "same-day")
    }

    @Test("a created: that is not a YYYY-MM-DD date is a Keys file error naming the key's place, without quoting the value",
          arguments: ["2025-13-01", "2025-02-30", "2025-6-1", "June 2025", "20250601", "2025-06-01T10:00:00Z", "\"\""])
    func badDates(_ text: String) throws {
        let path = writeKeys([("2024-01", TestKeys.hex(), nil), ("2025-06", TestKeys.hex(), text)])
        let before = FileSnapshot(path)
        #expect(throws: KeyConfigurationError.keysFileInvalid(path: path, location: "databases[0], key \"2025-06\"", problem: "created must be a date written YYYY-MM-DD, such as 2025-06-01")) {
            try KeysFile.load(path: path)
        }
        #expect(FileSnapshot(path) == before)
    }

    @Test("keys listed newest first by their created dates are refused, naming the database and both key ids; the file stays on its key")
    func outOfOrderRefused() throws {
        let ring = TestKeyring([.hex, .hex, .hex], in: directory)
        try Fixture.createWithLibrary(at: db, keys: try ring.only(0, database: db))
        let digest = try Fixture.digest(of: db, with: try ring.only(0, database: db))
        let hexes = ring.keys.map(\.secret)
        // k1 is the newest but listed first; the undated k2 between them is not compared.
        let path = writeKeys([("k1", hexes[0], "2025-06-01"), ("k2", hexes[1], nil), ("k3", hexes[2], "2024-01-01")])
        let before = FileSnapshot(db)
        let expected = KeyConfigurationError.keysOutOfOrder(database: db, newerKeyID: "k1", newerCreated: Self.day("2025-06-01"), olderKeyID: "k3", olderCreated: Self.day("2024-01-01"))
        do {
            let keys = try KeysFile.load(path: path).keyList(forDatabase: db, environment: [:])
            _ = try EncryptedDatabase(path: db, keys: keys)
            Issue.record("a key list in the wrong order was accepted, and the file opened with it")
        } catch let error as KeyConfigurationError {
            #expect(error == expected)
            #expect(error.description == "\(db): key \"k1\" (created 2025-06-01) is listed before the older key \"k3\" (created 2024-01-01), so files would be rotated back to the older key; list keys oldest first (the last is the current key), or correct their created dates")
            #expect(SecretScan.leaks(of: hexes, in: error.description).isEmpty)
        }
        #expect(FileSnapshot(db) == before)
        #expect(try Fixture.digest(of: db, with: try ring.only(0, database: db)) == digest)

        // The same list built in code.
        #expect(throws: expected) {
            try KeyList(database: db, keys: [Self.dated(ring, 0, "2025-06-01"), Self.dated(ring, 1, nil), Self.dated(ring, 2, "2024-01-01")], environment: [:])
        }
    }

    @Test("a rotation to a key created before the file's key logs a warning with the key ids and dates, no key material")
    func backwardRotationWarns() throws {
        let ring = TestKeyring([.hex, .hex, .hex], in: directory)
        let newest = try KeyList(database: db, keys: [Self.dated(ring, 2, "2026-01-01")], environment: [:])
        try Fixture.createWithLibrary(at: db, keys: newest)
        let digest = try Fixture.digest(of: db, with: newest)
        // A list in date order cannot rotate backwards (the file would have to be on a key it
        // lists), so the file's key comes from elsewhere: opened with the newest key, then
        // rotated with a list whose current key is older.
        let opened = try KeyProbe(keys: newest, trial: KeyedConnections(path: db, access: .readWrite, busyTimeout: .seconds(2))).run()
        let older = try KeyList(database: db, keys: [Self.dated(ring, 0, "2024-01-01"), Self.dated(ring, 1, "2025-01-01")], environment: [:])
        let capture = LogCapture()
        let opener = DatabaseOpener(path: db, keys: older, options: OpenOptions(logger: capture.logger))
        let (connection, _) = try opener.rotate(opened.connection, from: opened.key)
        connection.close()

        let warnings = capture.entries.filter { $0.level == .warning }
        #expect(warnings.count == 1, "\(capture.entries.map(\.text))")
        let warning = try #require(warnings.first)
        #expect(warning.text.contains("older than the one the file is on"))
        for expected in ["k3", "k2", "2026-01-01", "2025-01-01", db] {
            #expect(warning.text.contains(expected), "\(warning.text)")
        }
        #expect(SecretScan.leaks(of: ring.keys.map(\.secret), in: warning.text).isEmpty)
        #expect(try Fixture.digest(of: db, with: try ring.only(1, database: db)) == digest)
    }

    @Test("a forward rotation with dated keys, oldest first, rotates to the newest key, intact, with no warning")
    func forwardRotation() throws {
        let ring = TestKeyring([.hex, .passphrase], in: directory)
        let oldest = try KeyList(database: db, keys: [Self.dated(ring, 0, "2024-01-01")], environment: [:])
        try Fixture.createWithLibrary(at: db, keys: oldest)
        let digest = try Fixture.digest(of: db, with: oldest)
        let capture = LogCapture()
        let keys = try KeyList(database: db, keys: [Self.dated(ring, 0, "2024-01-01"), Self.dated(ring, 1, "2025-06-01")], environment: [:])
        let database = try EncryptedDatabase(path: db, keys: keys, options: OpenOptions(logger: capture.logger))
        #expect(database.report.openedWithKeyID == "k1" && database.report.rotated)
        #expect(try database.read { try Fixture.contentDigest($0) } == digest)
        #expect(capture.entries.filter { $0.level >= .warning }.isEmpty, "\(capture.entries.map(\.text))")
        #expect(try EncryptedDatabase.check(path: db, keys: try ring.only(1, database: db)).openedWithKeyID == "k2")
    }
}
