import EncryptedSQLite
import Foundation
import Testing
import TestSupport

private struct Player: TableRecord, Equatable {
    static let databaseTableName = "players"
    enum Level: String, Codable { case rookie, pro }
    struct Stats: Codable, Equatable { var wins: Int; var tags: [String] }
    var id: Int64?
    var name: String
    var score: Double
    var level: Level
    var stats: Stats
    var nickname: String?
    var joined: Date
    var avatar: Data?
}

/// The record of the Records article, as written there.
private struct ArticlePlayer: TableRecord, Equatable {
    static let databaseTableName = "players"     // required: the table
    // static let primaryKeyColumn = "id"         // the default

    var id: Int64?                                // nil until inserted: SQLite assigns it
    var name: String
    var score: Int
    var joinedAt: Date

    enum CodingKeys: String, CodingKey {          // coding keys are column names
        case id, name, score
        case joinedAt = "joined_at"
    }

    // Called by `db.insert(&player)` with the new row's rowid.
    mutating func didInsert(rowID: Int64) { id = rowID }
}

/// A record whose primary key is not the rowid: `didInsert` must not touch it.
private struct Tag: TableRecord, Equatable {
    static let databaseTableName = "tags"
    static let primaryKeyColumn = "code"
    var code: String
    var insertedRowID: Int64?
    mutating func didInsert(rowID: Int64) { insertedRowID = rowID }
    enum CodingKeys: String, CodingKey { case code }
}

@Suite("Decodable rows, Encodable arguments and records")
struct RecordTests {
    let joined = Date(timeIntervalSince1970: 1_700_000_000.25)

    func database() throws -> Scratch {
        let scratch = try Scratch()
        try scratch.run { db in
            try db.execute("CREATE TABLE players(id INTEGER PRIMARY KEY, name TEXT NOT NULL, score REAL, level TEXT, stats TEXT, nickname TEXT, joined TEXT, avatar BLOB)")
        }
        return scratch
    }

    @Test("insert, fetch by key, fetch all, update, upsert, delete, count")
    func crud() throws {
        let scratch = try database()
        try scratch.run { db in
            var ann = Player(id: nil, name: "Ann", score: 1.5, level: .pro, stats: .init(wins: 3, tags: ["a"]), nickname: "A", joined: joined, avatar: Data([1, 2]))
            ann.id = try db.insert(ann)
            #expect(ann.id == 1)
            let bob = Player(id: 7, name: "Bob", score: 0, level: .rookie, stats: .init(wins: 0, tags: []), nickname: nil, joined: joined, avatar: nil)
            try db.insert(bob)
            #expect(try db.fetch(Player.self, key: 1) == ann)
            #expect(try db.fetch(Player.self, key: 7) == bob)
            #expect(try db.fetch(Player.self, key: 99) == nil)
            #expect(try db.fetchAll(Player.self) == [ann, bob])
            #expect(try db.count(Player.self) == 2)

            ann.nickname = nil  // an update must write NULL, not skip the column
            ann.score = 9
            try db.update(ann)
            #expect(try db.fetch(Player.self, key: 1) == ann)
            #expect(throws: RecordError.notFound(table: "players", key: "42")) {
                try db.update(Player(id: 42, name: "X", score: 0, level: .rookie, stats: .init(wins: 0, tags: []), nickname: nil, joined: joined, avatar: nil))
            }
            var carl = bob
            carl.id = 8
            carl.name = "Carl"
            try db.upsert(carl)
            carl.score = 5
            try db.upsert(carl)
            #expect(try db.fetch(Player.self, key: 8) == carl)
            #expect(try db.count(Player.self) == 3)
            #expect(try db.delete(Player.self, key: 7))
            #expect(try !db.delete(Player.self, key: 7))
            #expect(try db.count(Player.self) == 2)
        }
    }

    @Test("insert(&record) hands the new rowid to didInsert; insert(record) returns it and leaves the record as it was")
    func insertSetsID() throws {
        let scratch = try Scratch()
        try scratch.run { db in
            try db.execute("CREATE TABLE players(id INTEGER PRIMARY KEY, name TEXT NOT NULL, score INTEGER NOT NULL, joined_at TEXT NOT NULL)")
            try db.execute("INSERT INTO players(id, name, score, joined_at) VALUES (41, 'Zed', 0, '2024-01-01')")
            var ann = ArticlePlayer(id: nil, name: "Ann", score: 10, joinedAt: joined)
            let annID = try db.insert(&ann)
            #expect(annID == 42)
            #expect(ann.id == 42)
            #expect(try db.fetch(ArticlePlayer.self, key: 42) == ann)

            let bob = ArticlePlayer(id: nil, name: "Bob", score: 7, joinedAt: joined)
            #expect(try db.insert(bob) == 43)
            #expect(bob.id == nil)

            // A failed insert leaves the record as it was.
            var clash = ArticlePlayer(id: 42, name: "Clash", score: 1, joinedAt: joined)
            let before = clash
            #expect(throws: SQLiteError.self) { try db.insert(&clash) }
            #expect(clash == before)

            // A text primary key: didInsert gets the rowid; the key stays the record's.
            try db.execute("CREATE TABLE tags(code TEXT PRIMARY KEY NOT NULL)")
            var tag = Tag(code: "swift")
            let tagRowID = try db.insert(&tag)
            #expect(tagRowID == 1)
            #expect(tag == Tag(code: "swift", insertedRowID: 1))
        }
    }

    @Test("a record that does not implement didInsert: insert(&record) returns the rowid and leaves the record as it was")
    func defaultDidInsert() throws {
        let scratch = try database()
        try scratch.run { db in
            var ann = Player(id: nil, name: "Ann", score: 1, level: .pro, stats: .init(wins: 0, tags: []), nickname: nil, joined: joined, avatar: nil)
            let unchanged = ann
            let annID = try db.insert(&ann)
            #expect(annID == 1)
            #expect(ann == unchanged)
        }
    }

    @Test("the Records article's example runs as written")
    func recordsArticleExample() throws {
        let directory = TemporaryDirectory("records")
        let path = directory.file("game.sqlite")
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "2025-06", source: .hex(TestKeys.hex()))])
        let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(createIfMissing: true))

        try database.write { db in
            try db.execute("""
                CREATE TABLE IF NOT EXISTS players(
                    id INTEGER PRIMARY KEY, name TEXT NOT NULL, score INTEGER NOT NULL, joined_at TEXT NOT NULL)
                """)
            var ann = ArticlePlayer(id: nil, name: "Ann", score: 10, joinedAt: Date())
            try db.insert(&ann)                  // ann.id is now SQLite's new rowid
            #expect(ann.id == 1)
            ann.score += 5
            try db.update(ann)                   // by primary key; RecordError.notFound if there is no such row

            let bob = ArticlePlayer(id: nil, name: "Bob", score: 7, joinedAt: Date())
            let bobID = try db.insert(bob)       // by value: returns the rowid, leaves `bob` as it was
            try db.upsert(ArticlePlayer(id: bobID, name: "Bob", score: 8, joinedAt: Date()))
        }

        let everyone = try database.read { db in try db.fetchAll(ArticlePlayer.self) }      // in primary-key order
        let first = try database.read { db in try db.fetch(ArticlePlayer.self, key: 1) }    // nil when absent
        let best = try database.read { db in
            try db.query(ArticlePlayer.self, "SELECT * FROM players WHERE score >= ? ORDER BY score DESC", [8])
        }
        try database.write { db in _ = try db.delete(ArticlePlayer.self, key: 1) }

        #expect(everyone.map(\.name) == ["Ann", "Bob"])
        #expect(everyone.map(\.score) == [15, 8])
        #expect(first?.name == "Ann")
        #expect(best.map(\.name) == ["Ann", "Bob"])
        #expect(try database.read { db in try db.count(ArticlePlayer.self) } == 1)
    }

    @Test("a query decodes into a Decodable type; Encodable values bind as named arguments")
    func codable() throws {
        struct Summary: Decodable, Equatable { let name: String; let doubled: Double; let level: Player.Level }
        struct Filter: Encodable { let minimum: Double }
        let scratch = try database()
        try scratch.run { db in
            try db.insert(Player(id: nil, name: "Ann", score: 2, level: .pro, stats: .init(wins: 1, tags: []), nickname: nil, joined: joined, avatar: nil))
            try db.insert(Player(id: nil, name: "Bob", score: 1, level: .rookie, stats: .init(wins: 1, tags: []), nickname: nil, joined: joined, avatar: nil))
            let rows = try db.query(Summary.self, "SELECT name, score * 2 AS doubled, level FROM players WHERE score >= :minimum", StatementArguments(encoding: Filter(minimum: 1.5)))
            #expect(rows == [Summary(name: "Ann", doubled: 4, level: .pro)])
            #expect(throws: DecodingError.self) { _ = try db.query(Summary.self, "SELECT name FROM players") }
            #expect(throws: DecodingError.self) { _ = try db.query(Summary.self, "SELECT name, 'x' AS doubled, level FROM players") }
        }
    }

    @Test("notFound shows the primary key as it is written (999999, \"abc\"), not as an internal value")
    func notFoundMessage() throws {
        struct Tag: TableRecord { static let databaseTableName = "tags"; static let primaryKeyColumn = "name"; var name: String; var uses: Int }
        let scratch = try database()
        try scratch.run { db in
            try db.execute("CREATE TABLE tags(name TEXT PRIMARY KEY, uses INTEGER)")
            do {
                try db.update(Player(id: 999999, name: "X", score: 0, level: .rookie, stats: .init(wins: 0, tags: []), nickname: nil, joined: joined, avatar: nil))
                Issue.record("updated a missing row")
            } catch let error as RecordError {
                #expect(error.description == "no row in players has primary key 999999")
            }
            do {
                try db.update(Tag(name: "abc", uses: 1))
                Issue.record("updated a missing row")
            } catch let error as RecordError {
                #expect(error.description == "no row in tags has primary key \"abc\"")
            }
        }
    }
}
