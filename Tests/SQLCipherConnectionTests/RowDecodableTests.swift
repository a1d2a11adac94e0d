import Foundation
import SQLCipherConnection
import Testing
import TestSupport

// Every conformance here is written by hand, in the shape the Records article shows: the coding
// keys' names in declaration order, and one `columns.decode(i, in: row)` a position.

private struct Sample: Codable, Equatable {
    enum Level: String, Codable { case rookie, pro }
    enum Rank: Int, Codable { case low = 1, high = 2 }
    struct Stats: Codable, Equatable { var wins: Int; var tags: [String] }
    var id: Int64
    var name: String
    var score: Double
    var active: Bool
    var small: Int32
    var count: Int
    var joined: Date
    var tag: UUID
    var avatar: Data
    var level: Level
    var rank: Rank?
    var stats: Stats
    var ratio: Float
    var tiny: Int8
    var nickname: String?
    var seen: Date?
    var other: UUID?
}

extension Sample: RowDecodable {
    static var databaseColumnNames: [String] {
        ["id", "name", "score", "active", "small", "count", "joined", "tag", "avatar", "level", "rank", "stats", "ratio", "tiny", "nickname", "seen", "other"]
    }
    init(row: StatementRow, columns: RowColumns) throws {
        self.id = try columns.decode(0, in: row)
        self.name = try columns.decode(1, in: row)
        self.score = try columns.decode(2, in: row)
        self.active = try columns.decode(3, in: row)
        self.small = try columns.decode(4, in: row)
        self.count = try columns.decode(5, in: row)
        self.joined = try columns.decode(6, in: row)
        self.tag = try columns.decode(7, in: row)
        self.avatar = try columns.decode(8, in: row)
        self.level = try columns.decode(9, in: row)
        self.rank = try columns.decode(10, in: row)
        self.stats = try columns.decode(11, in: row)
        self.ratio = try columns.decode(12, in: row)
        self.tiny = try columns.decode(13, in: row)
        self.nickname = try columns.decode(14, in: row)
        self.seen = try columns.decode(15, in: row)
        self.other = try columns.decode(16, in: row)
    }
}

/// Renamed columns (CodingKeys), a property that is not a column, and a `let` with its value.
private struct Renamed: Codable, Equatable {
    var id: Int64
    var displayName: String
    var joinedAt: Date?
    var transient: Int = 7
    let version = 1
    enum CodingKeys: String, CodingKey {
        case id = "player_id"
        case displayName = "display_name"
        case joinedAt = "joined_at"
    }
}

extension Renamed: RowDecodable {
    static var databaseColumnNames: [String] {
        ["player_id", "display_name", "joined_at"]
    }
    init(row: StatementRow, columns: RowColumns) throws {
        self.id = try columns.decode(0, in: row)
        self.displayName = try columns.decode(1, in: row)
        self.joinedAt = try columns.decode(2, in: row)
    }
}

/// Tells which initializer built it.
private struct Probe: RowDecodable, TableRecord, Equatable {
    static let databaseTableName = "probes"
    static var databaseColumnNames: [String] { ["id", "name"] }
    var id: Int64
    var name: String
    var viaPositions = false
    enum CodingKeys: String, CodingKey { case id, name }
    init(id: Int64, name: String) { self.id = id; self.name = name }
    init(row: StatementRow, columns: RowColumns) throws {
        id = try columns.decode(0, in: row)
        name = try columns.decode(1, in: row)
        viaPositions = true
    }
}

/// Controls: wrong conformances, which the comparison with `init(from:)` must report.
private struct Pair: Codable, Equatable { var first: String; var second: String }

/// Reads each position into the other property (both `String`: nothing throws).
private struct SwappedPair: Codable, Equatable { var first: String; var second: String }

extension SwappedPair: RowDecodable {
    static var databaseColumnNames: [String] { ["first", "second"] }
    init(row: StatementRow, columns: RowColumns) throws {
        self.first = try columns.decode(1, in: row)
        self.second = try columns.decode(0, in: row)
    }
}

/// Names a column that is not the coding key's.
private struct MisnamedPair: Codable, Equatable { var first: String; var second: String }

extension MisnamedPair: RowDecodable {
    static var databaseColumnNames: [String] { ["first", "secnd"] }
    init(row: StatementRow, columns: RowColumns) throws {
        self.first = try columns.decode(0, in: row)
        self.second = try columns.decode(1, in: row)
    }
}

/// What a `DecodingError` says, without the coding-key type (`CodingKeys` on the `Decodable` path).
private func summary(_ error: any Error) -> String {
    func path(_ context: DecodingError.Context) -> String { context.codingPath.map(\.stringValue).joined(separator: ".") }
    switch error {
    case DecodingError.keyNotFound(let key, let context): return "keyNotFound \(key.stringValue) at [\(path(context))]: \(context.debugDescription)"
    case DecodingError.typeMismatch(let type, let context): return "typeMismatch \(type) at [\(path(context))]: \(context.debugDescription)"
    case DecodingError.valueNotFound(let type, let context): return "valueNotFound \(type) at [\(path(context))]: \(context.debugDescription)"
    case DecodingError.dataCorrupted(let context): return "dataCorrupted at [\(path(context))]: \(context.debugDescription)"
    default: return "\(type(of: error)): \(error)"
    }
}

/// The error `body` throws, summarised (or "no error").
private func thrown(_ body: () throws -> Void) -> String {
    do { try body(); return "no error" } catch { return summary(error) }
}

/// How the rows (or the error) `db.query(T.self, sql)` reads by position differ from those the
/// type's `init(from:)` reads through `Row.decode`, or `nil` when they are the same.
private func difference<T: RowDecodable & Equatable>(_ db: Connection, _ type: T.Type, _ sql: String) -> String? {
    var positional: [T]?, codable: [T]?
    let positionalError = thrown { positional = try db.query(T.self, sql) }
    let codableError = thrown { codable = try db.query(sql).map { try $0.decode(T.self) } }
    if positional == codable && positionalError == codableError { return nil }
    return "by position \(positional.map { "\($0)" } ?? positionalError); init(from:) \(codable.map { "\($0)" } ?? codableError)"
}

/// Read through `init(from:)` only (it says so).
private struct Plain: Decodable {
    var name: String
    var viaDecoder = false
    enum CodingKeys: String, CodingKey { case name }
    init(from decoder: any Decoder) throws {
        name = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .name)
        viaDecoder = true
    }
}

@Suite("RowDecodable records against a real database: the Decodable path's rows and errors, by position")
struct RowDecodableTests {
    static let joined = Date(timeIntervalSince1970: 1_709_287_200.25)

    private static func sample(_ index: Int) -> Sample {
        Sample(id: Int64(index), name: "n\(index)", score: Double(index) / 4, active: index.isMultiple(of: 2), small: Int32(-index),
               count: index * 1000, joined: joined.addingTimeInterval(Double(index)), tag: UUID(), avatar: Data([UInt8(index), 0, 255]),
               level: index.isMultiple(of: 3) ? .pro : .rookie, rank: index.isMultiple(of: 4) ? nil : .high,
               stats: .init(wins: index, tags: ["t\(index)"]), ratio: Float(index) / 2, tiny: Int8(index),
               nickname: index.isMultiple(of: 2) ? nil : "nick", seen: index.isMultiple(of: 5) ? joined : nil, other: index == 1 ? UUID() : nil)
    }

    private static func makeSamples(_ db: Connection, count: Int = 12) throws -> [Sample] {
        try db.execute("""
            CREATE TABLE samples(id INTEGER PRIMARY KEY, name TEXT, score REAL, active INTEGER, small INTEGER, count INTEGER,
                joined TEXT, tag TEXT, avatar BLOB, level TEXT, rank INTEGER, stats TEXT, ratio REAL, tiny INTEGER,
                nickname TEXT, seen TEXT, other TEXT)
            """)
        let samples = (1...count).map(sample)
        for sample in samples {
            try db.execute("""
                INSERT INTO samples VALUES (:id, :name, :score, :active, :small, :count, :joined, :tag, :avatar, :level, :rank,
                    :stats, :ratio, :tiny, :nickname, :seen, :other)
                """, StatementArguments(encoding: sample))
        }
        return samples
    }

    @Test("SELECT * and a query with its columns in another order (and extra ones) read the same records as init(from:)")
    func sameRowsAsDecodable() throws {
        try Scratch().run { db in
            let samples = try Self.makeSamples(db)
            let star = "SELECT * FROM samples ORDER BY id"
            let shuffled = "SELECT other, 'x' AS extra, seen, nickname, tiny, ratio, stats, rank, level, avatar, tag, joined, count, small, active, score, name, id FROM samples ORDER BY id"
            for sql in [star, shuffled] {
                #expect(difference(db, Sample.self, sql) == nil)
                #expect(try db.query(Sample.self, sql) == samples)
            }
        }
    }

    @Test("controls: a conformance reading the wrong positions, or naming a wrong column, is reported")
    func wrongConformances() throws {
        try Scratch().run { db in
            try db.execute("CREATE TABLE pairs(first TEXT, second TEXT); INSERT INTO pairs VALUES ('a', 'b')")
            let sql = "SELECT * FROM pairs"
            #expect(try db.query(sql).map { try $0.decode(Pair.self) } == [Pair(first: "a", second: "b")])
            #expect(try db.query(SwappedPair.self, sql) == [SwappedPair(first: "b", second: "a")])
            #expect(difference(db, SwappedPair.self, sql) != nil)
            #expect(thrown { _ = try db.query(MisnamedPair.self, sql) } == "keyNotFound secnd at []: no column named secnd; the row has first, second")
            #expect(difference(db, MisnamedPair.self, sql) != nil)
            #expect(difference(db, SwappedPair.self, "SELECT 'x' AS first, 'x' AS second") == nil)  // the same rows either way
        }
    }

    @Test("optional columns: NULL and a missing column are nil; NULL in a non-optional column is the Decodable path's error")
    func optionalColumns() throws {
        try Scratch().run { db in
            _ = try Self.makeSamples(db, count: 5)
            let withoutOptionals = "SELECT id, name, score, active, small, count, joined, tag, avatar, level, stats, ratio, tiny FROM samples ORDER BY id"
            let records = try db.query(Sample.self, withoutOptionals)
            #expect(records.map(\.id) == [1, 2, 3, 4, 5])
            #expect(records.allSatisfy { $0.rank == nil && $0.nickname == nil && $0.seen == nil && $0.other == nil })
            #expect(difference(db, Sample.self, withoutOptionals) == nil)
            let nulls = try db.query(Sample.self, "SELECT * FROM samples WHERE id = 4")
            #expect(nulls.first?.rank == nil && nulls.first?.nickname == nil)

            try db.execute("UPDATE samples SET name = NULL WHERE id = 2")
            #expect(difference(db, Sample.self, "SELECT * FROM samples") == nil)
            #expect(thrown { _ = try db.query(Sample.self, "SELECT * FROM samples") }
                    == "typeMismatch String at [name]: the column holds NULL, which does not convert to String")
        }
    }

    @Test("a missing column, a value that does not convert and an unknown raw value are the Decodable path's errors")
    func errors() throws {
        try Scratch().run { db in
            _ = try Self.makeSamples(db, count: 3)
            let cases = [
                ("SELECT id, score FROM samples", "keyNotFound name at []: no column named name; the row has id, score"),
                ("SELECT *, 1 FROM (SELECT id, 'text' AS score, * FROM samples)", nil),  // the leftmost score is text
                ("SELECT * FROM (SELECT id, 'text' AS score, * FROM samples)", nil),
                ("SELECT 'amateur' AS level, * FROM samples", nil),
                ("SELECT 'not a date' AS joined, * FROM samples", nil),
                ("SELECT 'not a uuid' AS tag, * FROM samples", nil),
                ("SELECT 300 AS tiny, * FROM samples", nil),
                ("SELECT 'not json' AS stats, * FROM samples", nil),
                ("SELECT 5 AS rank, * FROM samples", nil),
            ]
            for (sql, expected) in cases {
                let positional = thrown { _ = try db.query(Sample.self, sql) }
                #expect(difference(db, Sample.self, sql) == nil, "\(sql)")
                #expect(positional != "no error", "\(sql)")
                if let expected { #expect(positional == expected) }
            }
            // No row, no error: the columns are only read when there is a row.
            #expect(try db.query(Sample.self, "SELECT id FROM samples WHERE id < 0").isEmpty)
        }
    }

    @Test("CodingKeys rename columns (matched exactly, then case-insensitively); other properties keep their values")
    func renamedColumns() throws {
        try Scratch().run { db in
            try db.execute("""
                CREATE TABLE players(player_id INTEGER PRIMARY KEY, DISPLAY_NAME TEXT, joined_at TEXT, transient INTEGER, version INTEGER);
                INSERT INTO players VALUES (1, 'Ann', '2024-03-01 10:00:00.250', 99, 99), (2, 'Bob', NULL, 99, 99)
                """)
            let sql = "SELECT * FROM players ORDER BY player_id"
            let positional = try db.query(Renamed.self, sql)
            #expect(difference(db, Renamed.self, sql) == nil)
            #expect(positional.map(\.displayName) == ["Ann", "Bob"])
            #expect(positional.map(\.joinedAt) == [Self.joined, nil])
            #expect(positional.map(\.transient) == [7, 7])
            #expect(positional.map(\.version) == [1, 1])
            #expect(thrown { _ = try db.query(Renamed.self, "SELECT id FROM (SELECT player_id AS id FROM players)") }
                    == "keyNotFound player_id at []: no column named player_id; the row has id")
            #expect(difference(db, Renamed.self, "SELECT id FROM (SELECT player_id AS id FROM players)") == nil)
        }
    }

    @Test("Date and UUID read from each stored form as on the Decodable path")
    func datesAndUUIDs() throws {
        try Scratch().run { db in
            let uuid = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
            try db.execute("CREATE TABLE forms(joined, tag)")
            try db.execute("""
                INSERT INTO forms VALUES ('2024-03-01T10:00:00.250Z', 'e621e1f8-c36c-495a-93fc-0c247a3e6e5f'),
                    (julianday('2024-03-01 10:00:00.250'), x'E621E1F8C36C495A93FC0C247A3E6E5F'),
                    (1709287200, 'E621E1F8-C36C-495A-93FC-0C247A3E6E5F'), ('2024-03-01 12:00:00.250+02:00', 'E621E1F8-C36C-495A-93FC-0C247A3E6E5F')
                """)
            let sql = """
                SELECT rowid AS id, 'n' AS name, 0.5 AS score, 1 AS active, 2 AS small, 3 AS count, joined, tag, x'00' AS avatar,
                    'pro' AS level, '{"wins":1,"tags":[]}' AS stats, 1.5 AS ratio, 4 AS tiny, joined AS seen, tag AS other FROM forms ORDER BY rowid
                """
            let positional = try db.query(Sample.self, sql)
            #expect(difference(db, Sample.self, sql) == nil)
            #expect(positional.map(\.tag) == Array(repeating: uuid, count: 4))
            #expect(positional.map(\.other) == Array(repeating: uuid, count: 4))
            #expect(positional.map { $0.joined.timeIntervalSince1970.rounded() } == [1_709_287_200, 1_709_287_200, 1_709_287_200, 1_709_287_200])
            #expect(positional.map(\.stats) == Array(repeating: Sample.Stats(wins: 1, tags: []), count: 4))
        }
    }

    @Test("the positional initializer serves query, StatementRow.decode, callers generic over Decodable and TableRecord; Row.decode stays init(from:)")
    func dispatch() throws {
        func generic<T: Decodable>(_ db: Connection, _ type: T.Type, _ sql: String) throws -> [T] { try db.query(T.self, sql) }
        func genericRow<T: Decodable>(_ row: StatementRow, _ type: T.Type) throws -> T { try row.decode(T.self) }
        try Scratch().run { db in
            try db.execute("CREATE TABLE probes(id INTEGER PRIMARY KEY, name TEXT)")
            try db.insert(Probe(id: 1, name: "a"))
            try db.insert(Probe(id: 2, name: "b"))
            let sql = "SELECT name, id FROM probes ORDER BY id"
            #expect(try db.query(Probe.self, sql).map(\.viaPositions) == [true, true])
            #expect(try generic(db, Probe.self, sql).map(\.viaPositions) == [true, true])
            #expect(try db.fetchAll(Probe.self).map(\.viaPositions) == [true, true])
            #expect(try db.fetch(Probe.self, key: 2)?.viaPositions == true)
            #expect(try db.fetch(Probe.self, key: 2)?.name == "b")
            var viaRows: [Bool] = []
            try db.prepare(sql).forEachRow { row in
                viaRows.append(try row.decode(Probe.self).viaPositions)
                viaRows.append(try genericRow(row, Probe.self).viaPositions)
            }
            #expect(viaRows == [true, true, true, true])
            #expect(try db.query(sql).map { try $0.decode(Probe.self).viaPositions } == [false, false])
            #expect(try db.query(sql).map { try $0.decode(Probe.self) } == [Probe(id: 1, name: "a"), Probe(id: 2, name: "b")])
            // A plain Decodable type read after a RowDecodable one from the same statement (which
            // remembers the last type it decoded) still goes through init(from:).
            var plain: [Bool] = []
            try db.prepare(sql).forEachRow { row in
                plain.append(try genericRow(row, Probe.self).viaPositions)
                plain.append(try genericRow(row, Plain.self).viaDecoder)
            }
            #expect(plain == [true, true, true, true])
        }
    }

    @Test("a cached statement that SQLite re-prepares with its columns in another order reads them by their new positions")
    func reprepared() throws {
        try Scratch().run { db in
            try db.execute("CREATE TABLE probes(id INTEGER PRIMARY KEY, name TEXT); INSERT INTO probes VALUES (1, 'a')")
            let sql = "SELECT * FROM probes"
            let statement = try db.cachedStatement(sql)
            #expect(try db.query(Probe.self, sql).map(\.name) == ["a"])
            try db.execute("""
                CREATE TABLE probes_new(name TEXT, id INTEGER PRIMARY KEY); INSERT INTO probes_new(name, id) SELECT name, id FROM probes;
                DROP TABLE probes; ALTER TABLE probes_new RENAME TO probes
                """)
            #expect(try db.query(Probe.self, sql).map(\.name) == ["a"])
            #expect(try db.cachedStatement(sql) === statement)
            #expect(statement.columnNames == ["name", "id"])
        }
    }

    @Test("RowColumns resolves names exactly first, then case-insensitively, leftmost first")
    func resolution() {
        let columns = RowColumns(names: ["id", "Name", "missing"], columnNames: ["name", "ID", "id", "NAME"])
        #expect(columns[0] == 2)
        #expect(columns[1] == 0)
        #expect(columns[2] == nil)
        #expect(columns.names == ["id", "Name", "missing"])
    }
}
