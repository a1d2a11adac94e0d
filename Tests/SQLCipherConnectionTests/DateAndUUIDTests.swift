import Foundation
import SQLCipherConnection
import Testing
import TestSupport

/// `Date` and `UUID` read from every common stored form, through each reading path: a row read in
/// place (`StatementRow.get`), a copied `Row`, and `Decodable` records (decoded in place and from
/// a `Row`). Values are written as SQL literals or by SQLite's own date functions, on a real
/// encrypted file.
@Suite("Dates and UUIDs: every common stored form, each reading path, clear errors")
struct DateAndUUIDTests {
    /// 2024-03-01 10:00:00 UTC.
    static let tenAM = Date(timeIntervalSince1970: 1_709_287_200)

    struct Event: Decodable {
        var at: Date
        var maybe: Date?
    }

    struct Tagged: Decodable {
        var tag: UUID
        var other: UUID?
    }

    /// Reads column `value` of every row of `table` as `T` through each path, in row order.
    private func readEveryWay<T: DatabaseValueConvertible & Equatable>(_ db: Connection, _ type: T.Type, table: String) throws -> [[T]] {
        let sql = "SELECT value FROM \(table) ORDER BY rowid"
        let inPlace = try db.query(sql) { row in try row.get(0, as: T.self) }
        let byName = try db.query(sql) { row in try row.get("value", as: T.self) }
        let copied = try db.query(sql).map { try $0.get("value", as: T.self) }
        let optional = try db.query(sql) { row in try row.get(0, as: T?.self) }.map { $0! }
        return [inPlace, byName, copied, optional]
    }

    private func nearlyEqual(_ left: Date, _ right: Date) -> Bool {
        abs(left.timeIntervalSince1970 - right.timeIntervalSince1970) < 0.000_001
    }

    @Test("ISO-8601 and SQLite date text, with and without T, seconds, fractions, Z and offsets, reads as Date on every path")
    func isoText() throws {
        let forms: [(String, TimeInterval)] = [
            ("2024-03-01T10:00:00Z", 0),
            ("2024-03-01T10:00:00.250Z", 0.25),
            ("2024-03-01t10:00:00z", 0),
            ("2024-03-01 10:00:00", 0),
            ("2024-03-01 10:00:00.000", 0),  // the stored form
            ("2024-03-01 10:00:00.123456", 0.123456),
            ("2024-03-01T10:00", 0),
            ("2024-03-01T10:00Z", 0),
            ("2024-03-01T12:00:00+02:00", 0),
            ("2024-03-01T12:00:00+0200", 0),
            ("2024-03-01T12:00:00+02", 0),
            ("2024-03-01T05:00:00.5-05:00", 0.5),
            ("2024-03-01 10:00:00 Z", 0),
            ("2024-03-01", -10 * 3600),
            ("2025-01-01", 1_735_689_600 - 1_709_287_200),
        ]
        let scratch = try Scratch()
        try scratch.run { db in
            try db.execute("CREATE TABLE dates(value TEXT)")
            for (text, _) in forms { try db.execute("INSERT INTO dates(value) VALUES (?)", [text]) }
            let expected = forms.map { Self.tenAM.addingTimeInterval($0.1) }
            for read in try readEveryWay(db, Date.self, table: "dates") {
                #expect(read.count == forms.count)
                for (index, date) in read.enumerated() {
                    #expect(nearlyEqual(date, expected[index]), "\(forms[index].0) read as \(date)")
                }
            }
            // SQLite's own reading of the forms it knows (not ±HHMM, ±HH) agrees to the millisecond.
            let sqlite = try db.query("SELECT value, (julianday(value) - 2440587.5) * 86400.0 FROM dates WHERE julianday(value) IS NOT NULL") { row in
                (try row.get(0, as: String.self), try row.get(1, as: Double.self))
            }
            #expect(sqlite.count >= 11)
            for (text, seconds) in sqlite {
                let ours = try #require(Date(databaseValue: .text(text)))
                #expect(abs(ours.timeIntervalSince1970 - seconds) < 0.001, "\(text)")
            }
        }
    }

    @Test("Julian days (REAL, from julianday()) and Unix time (INTEGER and REAL) read as Date on every path")
    func numbers() throws {
        let scratch = try Scratch()
        try scratch.run { db in
            try db.execute("CREATE TABLE dates(value)")
            try db.execute("""
                INSERT INTO dates(value) VALUES
                    (julianday('2024-03-01 10:00:00')),
                    (julianday('2024-03-01 10:00:00.250')),
                    (CAST(strftime('%s', '2024-03-01 10:00:00') AS INTEGER)),
                    (1709287200.5),
                    (-86400),
                    (julianday('1970-01-01'))
                """)
            let expected = [Self.tenAM, Self.tenAM.addingTimeInterval(0.25), Self.tenAM, Self.tenAM.addingTimeInterval(0.5),
                            Date(timeIntervalSince1970: -86400), Date(timeIntervalSince1970: 0)]
            let storageClasses = try db.query("SELECT typeof(value) FROM dates ORDER BY rowid").map { try $0.get(0, as: String.self) }
            #expect(storageClasses == ["real", "real", "integer", "real", "integer", "real"])
            for read in try readEveryWay(db, Date.self, table: "dates") {
                #expect(read.count == expected.count)
                for (index, date) in read.enumerated() {
                    #expect(nearlyEqual(date, expected[index]), "row \(index + 1) read as \(date)")
                }
            }
        }
    }

    @Test("Decodable records read Date from text, Julian days and Unix time, in place and from a Row")
    func decodableDates() throws {
        let scratch = try Scratch()
        try scratch.run { db in
            try db.execute("CREATE TABLE events(at, maybe)")
            try db.execute("""
                INSERT INTO events VALUES
                    ('2024-03-01T10:00:00Z', '2024-03-01T12:00:00+02:00'),
                    (julianday('2024-03-01 10:00:00'), NULL),
                    (1709287200, '2024-03-01')
                """)
            let inPlace = try db.query(Event.self, "SELECT * FROM events ORDER BY rowid")
            let fromRows = try db.query("SELECT * FROM events ORDER BY rowid").map { try $0.decode(Event.self) }
            for events in [inPlace, fromRows] {
                #expect(events.count == 3)
                for event in events { #expect(nearlyEqual(event.at, Self.tenAM)) }
                let maybes = events.map(\.maybe)
                #expect(nearlyEqual(maybes[0] ?? .distantPast, Self.tenAM))
                #expect(maybes[1] == nil)
                #expect(nearlyEqual(maybes[2] ?? .distantPast, Self.tenAM.addingTimeInterval(-10 * 3600)))
            }
        }
    }

    @Test("Date is stored as UTC text YYYY-MM-DD HH:MM:SS.SSS, which SQLite's date functions read back")
    func storedForm() throws {
        let scratch = try Scratch()
        try scratch.run { db in
            let date = Self.tenAM.addingTimeInterval(0.25)
            #expect(date.databaseValue == .text("2024-03-01 10:00:00.250"))
            try db.execute("CREATE TABLE dates(value)")
            try db.execute("INSERT INTO dates(value) VALUES (?)", [date])
            #expect(try db.queryValue("SELECT strftime('%Y-%m-%dT%H:%M:%f', value) FROM dates", as: String.self) == "2024-03-01T10:00:00.250")
            #expect(try db.queryValue("SELECT value FROM dates", as: Date.self) == date)
        }
    }

    @Test("text that is not a date, impossible dates and times, and blobs fail with an error naming the column and the accepted forms")
    func garbageDates() throws {
        let garbage = ["garbage", "2024-02-30", "2023-02-29", "2024-13-01", "2024-03-01 24:00", "2024-03-01 10:60", "2024-03-01 10:00:61",
                       "2024-03-01T10:00:00+", "2024-03-01T10:00:00+15:00", "2024-03-01T10:00:00Zulu", "2024-03-01T", "2024-03-01 10:00:00.",
                       "24-03-01", "2024-3-1", ""]
        let scratch = try Scratch()
        try scratch.run { db in
            try db.execute("CREATE TABLE dates(value)")
            for text in garbage { try db.execute("INSERT INTO dates(value) VALUES (?)", [text]) }
            try db.execute("INSERT INTO dates(value) VALUES (x'0102')")
            let rows = try db.query("SELECT value FROM dates ORDER BY rowid")
            for (index, row) in rows.enumerated() {
                let found = index < garbage.count ? "TEXT" : "BLOB"
                #expect(throws: StatementError.typeMismatch(column: "value", expected: "Date", found: found)) {
                    try row.get("value", as: Date.self)
                }
            }
            let inPlace = try db.query("SELECT value FROM dates ORDER BY rowid") { row in
                Result { try row.get(0, as: Date?.self) }
            }
            for result in inPlace {
                guard case .failure(let error) = result else {
                    Issue.record("a garbage value read as \(result)")
                    continue
                }
                let description = "\(error)"
                #expect(description.contains("Column \"value\""), "\(description)")
                #expect(description.contains("2024-03-01T10:00:00Z"), "\(description)")
                #expect(description.contains("Julian day"), "\(description)")
            }
            let decoded = Result { try db.query(Event.self, "SELECT value AS at, NULL AS maybe FROM dates") }
            guard case .failure(let error) = decoded else {
                Issue.record("garbage decoded as \(decoded)")
                return
            }
            let description = "\(error)"
            #expect(error is DecodingError)
            #expect(description.contains("at"), "\(description)")
            #expect(description.contains("2024-03-01T10:00:00Z"), "\(description)")
        }
    }

    @Test("UUID reads 8-4-4-4-12 text in either case and 16-byte blobs on every path, and is stored as uppercase text")
    func uuids() throws {
        let uuid = try #require(UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"))
        let scratch = try Scratch()
        try scratch.run { db in
            try db.execute("CREATE TABLE ids(value)")
            try db.execute("""
                INSERT INTO ids(value) VALUES
                    ('E621E1F8-C36C-495A-93FC-0C247A3E6E5F'),
                    ('e621e1f8-c36c-495a-93fc-0c247a3e6e5f'),
                    (x'E621E1F8C36C495A93FC0C247A3E6E5F')
                """)
            try db.execute("INSERT INTO ids(value) VALUES (?)", [uuid])
            #expect(try db.queryValue("SELECT typeof(value) || ':' || value FROM ids WHERE rowid = 4", as: String.self)
                == "text:E621E1F8-C36C-495A-93FC-0C247A3E6E5F")
            for read in try readEveryWay(db, UUID.self, table: "ids") {
                #expect(read == [uuid, uuid, uuid, uuid])
            }
            try db.execute("CREATE TABLE tagged(tag, other)")
            try db.execute("INSERT INTO tagged VALUES ('e621e1f8-c36c-495a-93fc-0c247a3e6e5f', x'E621E1F8C36C495A93FC0C247A3E6E5F'), (x'E621E1F8C36C495A93FC0C247A3E6E5F', NULL)")
            let inPlace = try db.query(Tagged.self, "SELECT * FROM tagged ORDER BY rowid")
            let fromRows = try db.query("SELECT * FROM tagged ORDER BY rowid").map { try $0.decode(Tagged.self) }
            for tagged in [inPlace, fromRows] {
                #expect(tagged.map(\.tag) == [uuid, uuid])
                #expect(tagged.map(\.other) == [uuid, nil])
            }
        }
    }

    @Test("text that is not a UUID and blobs of other lengths fail with an error naming the column and the accepted forms")
    func garbageUUIDs() throws {
        let scratch = try Scratch()
        try scratch.run { db in
            try db.execute("CREATE TABLE ids(value)")
            try db.execute("""
                INSERT INTO ids(value) VALUES ('not a uuid'), ('{E621E1F8-C36C-495A-93FC-0C247A3E6E5F}'),
                    ('E621E1F8C36C495A93FC0C247A3E6E5F'), ('E621E1F8-C36C-495A-93FC-0C247A3E6E5'), (x'E621E1F8C36C495A93FC0C247A3E6E'), (42)
                """)
            let results = try db.query("SELECT value FROM ids ORDER BY rowid") { row in Result { try row.get(0, as: UUID.self) } }
            #expect(results.count == 6)
            for result in results {
                guard case .failure(let error) = result else {
                    Issue.record("garbage read as \(result)")
                    continue
                }
                #expect("\(error)".contains("8-4-4-4-12"), "\(error)")
            }
            let decoded = Result { try db.query(Tagged.self, "SELECT value AS tag, NULL AS other FROM ids") }
            guard case .failure(let error) = decoded else {
                Issue.record("garbage decoded as \(decoded)")
                return
            }
            #expect("\(error)".contains("8-4-4-4-12"), "\(error)")
        }
    }
}
