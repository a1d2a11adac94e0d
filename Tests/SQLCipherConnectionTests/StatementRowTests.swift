import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// The fast paths: typed binding (`bind(values:)`, `execute(values:)`), rows read in place
/// (`StatementRow`), and decoding straight from a statement. Every test runs on a real encrypted
/// file; results are compared with the `Row` API, which reads the same values the general way.
///
/// Closures are never written inside `#expect(…)` here: with Swift 6.3, a trailing closure inside
/// the macro's expansion and a later closure of the same function were given the same name, and
/// the later call ran the earlier closure (seen in the debug build).
@Suite("Typed binding, rows read in place, in-place decoding")
struct StatementRowTests {
    /// An encrypted file with its raw key, so that the independent sqlcipher shell can read it.
    struct EncryptedFile {
        let directory = TemporaryDirectory("rows")
        let hex = TestKeys.hex()
        let path: String
        let database: EncryptedDatabase

        init() throws {
            path = directory.file("rows.sqlite")
            let keys = try KeyList(database: path, keys: [DatabaseKey(id: "k", source: .hex(hex))])
            database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(createIfMissing: true))
        }

        func run<T>(_ body: (Connection) throws -> T) throws -> T { try database.writeWithoutTransaction(body) }
    }

    @Test("execute(values:) binds every supported type; the sqlcipher shell reads back what was written")
    func typedValuesRoundTrip() throws {
        let file = try EncryptedFile()
        let date = Date(timeIntervalSince1970: 1_700_000_000.5)
        let long = String(repeating: "long text ✓ ", count: 600)  // > 4 KiB: copied by SQLite, not buffered
        try file.run { db in
            try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, i INTEGER, d REAL, s TEXT, b BLOB, flag INTEGER, at TEXT, n TEXT)")
            let insert = try db.prepare("INSERT INTO t(id, i, d, s, b, flag, at, n) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
            try insert.execute(values: Int64(1), 42, 1.5, "héllo", [UInt8]([1, 2, 3]), true, date, String?.none)
            try insert.execute(values: Int64(2), Int32(-7), 0.0, "", Data(), false, date, String?.some("x"))
            try insert.execute(values: Int64(3), Int.max, -2.25, long, Data(repeating: 9, count: 5000), true, date, "🙂")
            #expect(db.lastInsertRowID == 3)

            let rows = try db.query("SELECT * FROM t ORDER BY id")
            #expect(rows[0].values == [.integer(1), .integer(42), .real(1.5), .text("héllo"), .blob([1, 2, 3]), .integer(1), date.databaseValue, .null])
            #expect(rows[1].values == [.integer(2), .integer(-7), .real(0), .text(""), .blob([]), .integer(0), date.databaseValue, .text("x")])
            #expect(rows[2].values == [.integer(3), .integer(Int64(Int.max)), .real(-2.25), .text(long), .blob([UInt8](repeating: 9, count: 5000)),
                                       .integer(1), date.databaseValue, .text("🙂")])
        }
        let shell = try SQLCipherShell.run(file.path, key: .hex(file.hex), "SELECT id, i, d, s, hex(b), n FROM t WHERE id < 3 ORDER BY id;")
        #expect(shell.status == 0)
        #expect(shell.stdout == "1|42|1.5|héllo|010203|\n2|-7|0.0|||x\n")
    }

    @Test("a statement reused for thousands of rows of changing lengths binds each row's own bytes (buffer growth, reuse)")
    func reusedStatementKeepsEachRowsBytes() throws {
        let file = try EncryptedFile()
        // Lengths that make the statement's bytes buffer grow several times, shrink back, and
        // cross the 4 KiB limit above which SQLite copies the value itself.
        let texts = (0..<3000).map { index in String(repeating: Character(UnicodeScalar(UInt8(65 + index % 26))), count: (index * 37) % 5000) + "#\(index)" }
        try file.run { db in
            try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b BLOB, c TEXT)")
            try db.transaction { db in
                let insert = try db.prepare("INSERT INTO t(id, a, b, c) VALUES (?, ?, ?, ?)")
                for (index, text) in texts.enumerated() {
                    try insert.execute(values: Int64(index), text, Array(text.utf8.reversed()), "\(index)")
                }
            }
            let read = try db.query("SELECT a, b, c FROM t ORDER BY id") { row in
                (try row.get(0, as: String.self), try row.get(1, as: [UInt8].self), try row.get("c", as: String.self))
            }
            #expect(read.count == texts.count)
            for (index, (a, b, c)) in read.enumerated() {
                #expect(a == texts[index])
                #expect(b == Array(texts[index].utf8.reversed()))
                #expect(c == "\(index)")
            }
            #expect(try db.queryValue("SELECT count(*) FROM t WHERE length(a) = length(b)", as: Int.self) == texts.count)
        }
        #expect(try SQLCipherShell.opens(file.path, with: .hex(file.hex)))
    }

    @Test("bind(values:) checks the count before touching the bindings; the binding APIs mix on one statement")
    func bindingErrors() throws {
        let file = try EncryptedFile()
        try file.run { db in
            try db.execute("CREATE TABLE t(a, b)")
            let sql = "INSERT INTO t VALUES (?, ?)"
            let insert = try db.prepare(sql)
            #expect(throws: StatementError.argumentCountMismatch(expected: 2, given: 1, sql: sql)) { try insert.execute(values: "secret-value") }
            #expect(throws: StatementError.argumentCountMismatch(expected: 2, given: 3, sql: sql)) { try insert.execute(values: 1, 2, 3) }
            try insert.execute(values: "kept", 2)
            #expect(throws: StatementError.self) { try insert.bind(values: 1) }
            while try insert.step() {}  // runs with the bindings of the last successful bind
            let keptRows = try db.query("SELECT a FROM t") { try $0.get(0, as: String.self) }
            #expect(keptRows == ["kept", "kept"])
            // Mixing the APIs on one statement: StatementArguments after typed values and back.
            try insert.execute(["array", 3])
            try insert.execute(values: "typed", 4)
            let mixedRows = try db.query("SELECT a, b FROM t WHERE b > 2 ORDER BY b") { "\(try $0.get(0, as: String.self))\(try $0.get(1, as: Int.self))" }
            #expect(mixedRows == ["array3", "typed4"])
            insert.clearBindings()
            insert.reset()
            while try insert.step() {}
            #expect(try db.queryValue("SELECT count(*) FROM t WHERE a IS NULL AND b IS NULL", as: Int.self) == 1)
        }
    }

    @Test("StatementRow.get converts exactly like Row.get, for every storage class and requested type")
    func conversionsMatchRow() throws {
        let file = try EncryptedFile()
        try file.run { db in
            try db.execute("""
                CREATE TABLE t(v);
                INSERT INTO t VALUES (42), (-3), (2.0), (2.5), ('text'), ('2024-01-02 03:04:05.678'), (x'0102'), (NULL), (1e300), (0);
                """)
            let select = try db.prepare("SELECT v AS value FROM t ORDER BY rowid")
            let rows = try select.fetchAll()
            var index = 0
            try select.forEachRow { row in
                let reference = rows[index]
                index += 1
                func same<T: DatabaseValueConvertible & Equatable>(_ type: T.Type) {
                    let fromRow = Result { try reference.get(0, as: T.self) }.mapError { $0 as! StatementError }
                    let inPlace = Result { try row.get(0, as: T.self) }.mapError { $0 as! StatementError }
                    let byName = Result { try row.get("VALUE", as: T.self) }.mapError { $0 as! StatementError }
                    #expect(inPlace == fromRow, "\(T.self) from \(reference[0])")
                    #expect(byName == fromRow, "\(T.self) by name from \(reference[0])")
                }
                same(Int64.self); same(Int.self); same(Int32.self); same(Double.self); same(String.self); same(Bool.self)
                same([UInt8].self); same(Data.self); same(Date.self); same(DatabaseValue.self)
                same(Int64?.self); same(Int?.self); same(Double?.self); same(String?.self); same(Bool?.self)
                #expect(row[0] == reference[0])
                #expect(row["value"] == reference["value"])
                #expect(row.isNull(0) == reference[0].isNull)
                #expect(row.row == reference)
            }
            #expect(index == rows.count)
        }
    }

    @Test("row view errors: index out of range, unknown column, mismatched type, each naming the column")
    func rowViewErrors() throws {
        let file = try EncryptedFile()
        try file.run { db in
            let found = try db.queryOne("SELECT NULL AS n, 'x' AS t") { row in
                #expect(row.count == 2)
                #expect(row.columnNames == ["n", "t"])
                #expect(row.columnIndex(of: "T") == 1)
                #expect(row["missing"] == nil)
                #expect(throws: StatementError.typeMismatch(column: "n", expected: "String", found: "NULL")) { try row.get("n", as: String.self) }
                #expect(throws: StatementError.typeMismatch(column: "t", expected: "Int64", found: "TEXT")) { try row.get(1, as: Int64.self) }
                #expect(throws: StatementError.noSuchColumn(name: "missing", available: ["n", "t"])) { try row.get("missing", as: Int64.self) }
                #expect(throws: StatementError.columnIndexOutOfRange(index: 5, count: 2)) { try row.get(5, as: Int64.self) }
                #expect(throws: StatementError.columnIndexOutOfRange(index: -1, count: 2)) { try row.get(-1, as: Int64.self) }
                return try row.get("n", as: String?.self)
            }
            #expect(found == .some(nil))
            let noRow = try db.queryOne("SELECT 1 WHERE 0") { try $0.get(0, as: Int.self) }
            #expect(noRow == nil)
        }
    }

    @Test("names are matched per request; rows asking for different names, or in another order, still get the right columns")
    func nameRequestsInAnyOrder() throws {
        let file = try EncryptedFile()
        try file.run { db in
            try db.execute("CREATE TABLE t(a INTEGER, b TEXT, c REAL); INSERT INTO t VALUES (1, 'one', 1.5), (2, 'two', 2.5), (3, 'three', 3.5), (4, 'four', 4.5)")
            let values = try db.query("SELECT a, b, c, a AS A2 FROM t ORDER BY a") { row -> String in
                let a = try row.get("a", as: Int.self)
                // Odd rows ask for c then b, even rows b then c; row 3 asks for an extra name.
                let tail = a.isMultiple(of: 2)
                    ? "\(try row.get("B", as: String.self))/\(try row.get("c", as: Double.self))"
                    : "\(try row.get("c", as: Double.self))/\(try row.get("b", as: String.self))"
                return "\(a):\(tail)" + (a == 3 ? ":\(try row.get("a2", as: Int.self))" : "")
            }
            #expect(values == ["1:1.5/one", "2:two/2.5", "3:3.5/three:3", "4:four/4.5"])
        }
    }

    @Test("fetchAll(values:) and fetchOne(values:) bind, read in place and reset; the statement runs again")
    func fetchWithValues() throws {
        let file = try EncryptedFile()
        try file.run { db in
            try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, score REAL)")
            let insert = try db.prepare("INSERT INTO t(name, score) VALUES (?, ?)")
            for index in 1...50 { try insert.execute(values: "n\(index)", Double(index) / 2) }
            let above = try db.cachedStatement("SELECT name FROM t WHERE score > ? ORDER BY id")
            let aboveHalf = try above.fetchAll(values: 23.5) { try $0.get(0, as: String.self) }
            #expect(aboveHalf == ["n48", "n49", "n50"])
            let aboveMore = try above.fetchAll(values: 24.5) { try $0.get(0, as: String.self) }
            #expect(aboveMore == ["n50"])
            let lookup = try db.cachedStatement("SELECT id, name, score FROM t WHERE id = ?")
            for id in [7, 1, 50, 7] {
                let found = try lookup.fetchOne(values: id) { row in "\(try row.get(0, as: Int.self)) \(try row.get("name", as: String.self)) \(try row.get(2, as: Double.self))" }
                #expect(found == "\(id) n\(id) \(Double(id) / 2)")
            }
            let missing = try lookup.fetchOne(values: 999) { try $0.get(0, as: Int.self) }
            #expect(missing == nil)
            // The statement was reset: the writer can commit a transaction after the lookups.
            try db.transaction { db in try db.execute("DELETE FROM t WHERE id > 10") }
            #expect(try db.queryValue("SELECT count(*) FROM t", as: Int.self) == 10)
            let count = try db.query("SELECT count(*) FROM t WHERE name LIKE :p", ["p": "n1%"]) { try $0.get(0, as: Int.self) }
            #expect(count == [2])
        }
    }

    @Test("a cached statement that SQLite re-prepares after a schema change reads the new columns by name (before: the names of its first preparation, so a rebuilt table's columns were swapped)")
    func schemaChangeRefreshesColumnNames() throws {
        struct Item: Decodable, Equatable { let a: String; let b: String }
        let file = try EncryptedFile()
        try file.run { db in
            try db.execute("CREATE TABLE t(a TEXT, b TEXT); INSERT INTO t VALUES ('a1', 'b1')")
            let sql = "SELECT * FROM t"
            let statement = try db.cachedStatement(sql)
            let before = try db.query(Item.self, sql)
            let beforeByName = try db.query(sql) { row in try row.get("b", as: String.self) }
            let beforeRows = try statement.fetchAll().map { try $0.get("b", as: String.self) }
            #expect(before == [Item(a: "a1", b: "b1")])
            #expect(beforeByName == ["b1"])
            #expect(beforeRows == ["b1"])

            // The table rebuild SQLite's ALTER TABLE documentation recommends: same names, other order.
            try db.execute("""
                CREATE TABLE t_new(b TEXT, a TEXT); INSERT INTO t_new(b, a) SELECT b, a FROM t;
                DROP TABLE t; ALTER TABLE t_new RENAME TO t
                """)
            let rebuilt = try db.query(Item.self, sql)
            let rebuiltByName = try db.query(sql) { row in try row.get("b", as: String.self) }
            let rebuiltRows = try statement.fetchAll().map { try $0.get("b", as: String.self) }
            #expect(try db.cachedStatement(sql) === statement)
            #expect(rebuilt == [Item(a: "a1", b: "b1")])
            #expect(rebuiltByName == ["b1"])
            #expect(rebuiltRows == ["b1"])
            #expect(statement.columnNames == ["b", "a"])

            // A column added: the statement's rows have it.
            try db.execute("ALTER TABLE t ADD COLUMN c TEXT DEFAULT 'c1'")
            let added = try db.query(sql) { row in try row.get("c", as: String.self) }
            let addedRows = try statement.fetchAll().map { try $0.get("c", as: String.self) }
            #expect(added == ["c1"])
            #expect(addedRows == ["c1"])
            #expect(statement.columnNames == ["b", "a", "c"])
        }
    }

    @Test("a throwing row closure propagates its error and leaves the statement reset")
    func throwingTransform() throws {
        struct Stop: Error {}
        let file = try EncryptedFile()
        try file.run { db in
            try db.execute("CREATE TABLE t(a); INSERT INTO t VALUES (1), (2), (3)")
            let select = try db.prepare("SELECT a FROM t ORDER BY a")
            #expect(throws: Stop.self) { _ = try select.fetchAll { row in if try row.get(0, as: Int.self) == 2 { throw Stop() } } }
            let again = try select.fetchAll { try $0.get(0, as: Int.self) }
            #expect(again == [1, 2, 3])
            try db.execute("DROP TABLE t")  // fails with SQLITE_LOCKED if a statement were left running
        }
    }

    private struct Player: Codable, Equatable {
        enum Level: String, Codable { case rookie, pro }
        struct Stats: Codable, Equatable { var wins: Int }
        var id: Int64
        var name: String
        var score: Double
        var level: Level
        var stats: Stats
        var nickname: String?
        var active: Bool
        var joined: Date
        var rank: Int32
        var count: Int
    }

    private struct Summary: Decodable, Equatable {
        let name: String
        let level: Player.Level
    }

    @Test("query(T.self) and StatementRow.decode decode in place exactly like Row.decode, types alternating on one statement")
    func inPlaceDecoding() throws {
        let file = try EncryptedFile()
        let joined = Date(timeIntervalSince1970: 1_700_000_000.25)
        try file.run { db in
            try db.execute("CREATE TABLE players(id INTEGER PRIMARY KEY, name TEXT, score REAL, level TEXT, stats TEXT, nickname TEXT, active INTEGER, joined TEXT, rank INTEGER, count INTEGER)")
            let players = (1...40).map { index in
                Player(id: Int64(index), name: "p\(index)", score: Double(index) * 1.5, level: index.isMultiple(of: 3) ? .pro : .rookie,
                       stats: .init(wins: index), nickname: index.isMultiple(of: 2) ? "nick\(index)" : nil, active: index.isMultiple(of: 5),
                       joined: joined, rank: Int32(-index), count: index * 1000)
            }
            for player in players {
                try db.execute("INSERT INTO players VALUES (:id, :name, :score, :level, :stats, :nickname, :active, :joined, :rank, :count)",
                               StatementArguments(encoding: player))
            }
            // Columns in another order than the coding keys, and an extra column.
            let sql = "SELECT count, rank, joined, active, nickname, stats, level, score, name, id, 'extra' AS extra FROM players ORDER BY id"
            #expect(try db.query(Player.self, sql) == players)
            let viaRows = try db.query(sql).map { try $0.decode(Player.self) }
            #expect(viaRows == players)
            // Two types decoded alternately from the same statement's rows.
            let select = try db.prepare(sql)
            var decoded: [String] = []
            try select.forEachRow { row in
                let player = try row.decode(Player.self)
                let summary = try row.decode(Summary.self)
                #expect(summary == Summary(name: player.name, level: player.level))
                decoded.append(summary.name)
            }
            #expect(decoded == players.map(\.name))
            // Single-column rows decode as a single value.
            #expect(try db.query(Int.self, "SELECT id FROM players WHERE id <= 3 ORDER BY id") == [1, 2, 3])
        }
    }

    @Test("in-place decoding errors are DecodingErrors naming the key, as with Row.decode")
    func inPlaceDecodingErrors() throws {
        let file = try EncryptedFile()
        try file.run { db in
            try db.execute("CREATE TABLE t(name TEXT, level TEXT); INSERT INTO t VALUES ('a', 'pro'), ('b', 'unknown')")
            do {
                _ = try db.query(Summary.self, "SELECT name FROM t")
                Issue.record("expected keyNotFound")
            } catch DecodingError.keyNotFound(let key, _) {
                #expect(key.stringValue == "level")
            }
            #expect(throws: DecodingError.self) { _ = try db.query(Summary.self, "SELECT name, level FROM t") }  // 'unknown' is no Level
            #expect(throws: DecodingError.self) { _ = try db.query(Summary.self, "SELECT 1 AS name, level FROM t") }  // an integer is no String
            #expect(try db.query(Summary.self, "SELECT name, level FROM t WHERE name = 'a'") == [Summary(name: "a", level: .pro)])
        }
    }

    private struct Sizes: Codable, Equatable {
        var tiny: Int8
        var small: UInt16
        var wide: UInt32
        var huge: UInt64
        var ratio: Float
    }

    @Test("Int8…UInt64 and Float properties encode and decode (they used to recurse forever); out-of-range values are errors")
    func otherNumericTypes() throws {
        let file = try EncryptedFile()
        try file.run { db in
            try db.execute("CREATE TABLE sizes(tiny, small, wide, huge, ratio)")
            let value = Sizes(tiny: -128, small: 65535, wide: 4_000_000_000, huge: UInt64(Int64.max), ratio: 0.25)
            try db.execute("INSERT INTO sizes VALUES (:tiny, :small, :wide, :huge, :ratio)", StatementArguments(encoding: value))
            let decoded = try db.query(Sizes.self, "SELECT * FROM sizes")
            #expect(decoded == [value])
            let viaRow = try db.query("SELECT * FROM sizes").map { try $0.decode(Sizes.self) }
            #expect(viaRow == [value])
            #expect(throws: DecodingError.self) { _ = try db.query(Sizes.self, "SELECT 300 AS tiny, 1 AS small, 1 AS wide, 1 AS huge, 1.0 AS ratio") }
            #expect(throws: DecodingError.self) { _ = try db.query(Sizes.self, "SELECT 1 AS tiny, 'x' AS small, 1 AS wide, 1 AS huge, 1.0 AS ratio") }
            #expect(throws: EncodingError.self) { _ = try StatementArguments(encoding: Sizes(tiny: 0, small: 0, wide: 0, huge: .max, ratio: 0)) }
        }
    }
}
