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
