import CipherFormats
import Foundation
import KeyConfiguration
import SQLCipherConnection
import Testing
import TestSupport

@Suite("Connection API")
struct ConnectionTests {
    @Test("execute runs several statements; query returns typed rows by index and by name")
    func executeAndQuery() throws {
        let scratch = try Scratch()
        try scratch.run { db in
            try db.execute("""
                CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, score REAL, data BLOB, flag INTEGER, at TEXT);
                INSERT INTO t(name, score, data, flag, at) VALUES ('a', 1.5, x'0102', 1, '2024-01-02 03:04:05.678');
                INSERT INTO t(name, score, data, flag, at) VALUES (NULL, NULL, NULL, 0, NULL);
                """)
            let rows = try db.query("SELECT * FROM t ORDER BY id")
            #expect(rows.count == 2)
            let first = rows[0]
            #expect(try first.get(0, as: Int64.self) == 1)
            #expect(try first.get("name", as: String.self) == "a")
            #expect(try first.get("NAME", as: String.self) == "a")  // case-insensitive like SQL
            #expect(try first.get("score", as: Double.self) == 1.5)
            #expect(try first.get("data", as: [UInt8].self) == [1, 2])
            #expect(try first.get("data", as: Data.self) == Data([1, 2]))
            #expect(try first.get("flag", as: Bool.self) == true)
            let date = try first.get("at", as: Date.self)
            #expect(abs(date.timeIntervalSince1970 - 1_704_164_645.678) < 0.001)
            let second = rows[1]
            #expect(try second.get("name", as: String?.self) == nil)
            #expect(second["score"] == .null)
            #expect(try second.get("flag", as: Bool.self) == false)
            #expect(first.dictionary["name"] == .text("a"))
            #expect(first.columnNames == ["id", "name", "score", "data", "flag", "at"])
        }
    }

    @Test("a closed connection refuses every statement with SQLite's misuse error instead of using its freed handle")
    func closedConnection() throws {
        let folder = TemporaryDirectory("closed-connection")
        let connection = try Connection(path: folder.file("plain.sqlite"), access: .readWrite, create: true, key: nil, busyTimeout: .seconds(1))
        try connection.execute("CREATE TABLE t(x); INSERT INTO t(x) VALUES (1)")
        connection.close()
        for attempt: () throws -> Void in [
            { _ = try connection.prepare("SELECT x FROM t") },
            { try connection.execute("INSERT INTO t(x) VALUES (2)") },
            { _ = try connection.query("SELECT x FROM t") },
            { _ = try connection.cachedStatement("SELECT x FROM t") },
            { try connection.transaction(.immediate) { _ in } },
        ] {
            #expect { try attempt() } throws: { error in
                (error as? SQLiteError)?.code == .misuse && "\(error)".contains("the connection is closed")
            }
        }
        let reopened = try Connection(path: folder.file("plain.sqlite"), access: .readOnly, key: nil, busyTimeout: .seconds(1))
        #expect(try reopened.queryValue("SELECT count(*) FROM t", as: Int.self) == 1)
    }

    @Test("reading NULL or the wrong type as a non-optional is a typed error naming the column")
    func typeErrors() throws {
        let scratch = try Scratch()
        try scratch.run { db in
            let row = try #require(try db.queryOne("SELECT NULL AS n, 'x' AS t"))
            #expect(throws: StatementError.typeMismatch(column: "n", expected: "String", found: "NULL")) { try row.get("n", as: String.self) }
            #expect(throws: StatementError.typeMismatch(column: "t", expected: "Int64", found: "TEXT")) { try row.get("t", as: Int64.self) }
            #expect(throws: StatementError.noSuchColumn(name: "missing", available: ["n", "t"])) { try row.get("missing", as: Int64.self) }
            #expect(throws: StatementError.columnIndexOutOfRange(index: 5, count: 2)) { try row.get(5, as: Int64.self) }
        }
    }

    @Test("binding: ?, ?NNN, :name, @name, $name, NULL, empty text and empty blob")
    func binding() throws {
        let scratch = try Scratch()
        try scratch.run { db in
            try db.execute("CREATE TABLE t(a, b, c)")
            try db.execute("INSERT INTO t VALUES (?, ?, ?)", [1, "two", nil])
            try db.execute("INSERT INTO t VALUES (?3, ?1, ?2)", [10, 20, 30])
            try db.execute("INSERT INTO t VALUES (:a, @b, $c)", ["a": 4, ":b": "", "$c": [UInt8]()])
            let rows = try db.query("SELECT a, b, c FROM t ORDER BY rowid")
            #expect(rows[0].values == [.integer(1), .text("two"), .null])
            #expect(rows[1].values == [.integer(30), .integer(10), .integer(20)])
            #expect(rows[2].values == [.integer(4), .text(""), .blob([])])
            #expect(try db.queryValue("SELECT count(*) FROM t WHERE b = :b", ["b": "two"], as: Int.self) == 1)
        }
    }

    @Test("argument mistakes are typed errors that name the SQL but never the values")
    func argumentErrors() throws {
        let scratch = try Scratch()
        try scratch.run { db in
            try db.execute("CREATE TABLE t(a, b)")
            let sql = "INSERT INTO t VALUES (?, ?)"
            #expect(throws: StatementError.argumentCountMismatch(expected: 2, given: 1, sql: sql)) { try db.execute(sql, ["secret-value"]) }
            #expect(throws: StatementError.argumentCountMismatch(expected: 2, given: 3, sql: sql)) { try db.execute(sql, [1, 2, 3]) }
            let named = "INSERT INTO t VALUES (:a, :b)"
            #expect(throws: StatementError.missingNamedArgument(name: ":b", sql: named)) { try db.execute(named, ["a": 1]) }
            #expect(throws: StatementError.unusedNamedArgument(name: "c", sql: named)) { try db.execute(named, ["a": 1, "b": 2, "c": 3]) }
            #expect(throws: StatementError.unnamedParameterWithNamedArguments(index: 1, sql: sql)) { try db.execute(sql, ["a": 1]) }
            do {
                try db.execute("INSERT INTO missing VALUES (?)", ["secret-value"])
                Issue.record("expected an error")
            } catch let error as SQLiteError {
                #expect(error.code.primary == .error)
                #expect(error.sql == "INSERT INTO missing VALUES (?)")
                #expect(error.message.contains("no such table"))
                #expect(!error.description.contains("secret-value"))
            }
        }
    }

    @Test("positional arguments spread over several statements in one execute")
    func multiStatementArguments() throws {
        let scratch = try Scratch()
        try scratch.run { db in
            try db.execute("CREATE TABLE t(a); INSERT INTO t VALUES (?); INSERT INTO t VALUES (?)", [1, 2])
            #expect(try db.queryValue("SELECT sum(a) FROM t", as: Int.self) == 3)
            #expect(throws: StatementError.self) { try db.execute("INSERT INTO t VALUES (?); INSERT INTO t VALUES (?)", [1]) }
        }
    }

    @Test("prepared statements step, reset and run again; lastInsertRowID and changes")
    func preparedStatements() throws {
        let scratch = try Scratch()
        try scratch.run { db in
            try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT)")
            let insert = try db.prepare("INSERT INTO t(name) VALUES (?)")
            for name in ["a", "b", "c"] { try insert.execute([name]) }
            #expect(db.lastInsertRowID == 3)
            try db.execute("UPDATE t SET name = upper(name) WHERE id >= 2")
            #expect(db.changes == 2)
            let select = try db.prepare("SELECT id, name FROM t WHERE id >= ? ORDER BY id")
            try select.bind([2])
            var names: [String] = []
            while try select.step() { names.append(select.text(at: 1)) }
            #expect(names == ["B", "C"])
            select.reset()
            #expect(try select.step())
            #expect(select.int64(at: 0) == 2)
            #expect(try select.fetchAll([1]).count == 3)
            #expect(select.columnNames == ["id", "name"])
        }
    }

    @Test("user_version and application_id round-trip")
    func pragmas() throws {
        let scratch = try Scratch()
        try scratch.run { db in
            try db.setUserVersion(7)
            try db.setApplicationID(99)
            #expect(try db.userVersion() == 7)
            #expect(try db.applicationID() == 99)
        }
    }

    @Test("temp_store stays MEMORY; key and cipher_default pragmas are refused as SQL")
    func guardedPragmas() throws {
        let scratch = try Scratch()
        try scratch.run { db in
            #expect(try db.queryValue("PRAGMA temp_store", as: Int.self) == 2)
            for sql in ["PRAGMA temp_store = FILE", "PRAGMA temp_store = 1", "PRAGMA temp_store_directory = '/tmp'",
                        "PRAGMA key = 'x'", "PRAGMA rekey = 'x'", "PRAGMA hexrekey = '00'", "PRAGMA cipher_default_kdf_iter = 1"] {
                do {
                    try db.execute(sql)
                    Issue.record("\(sql) was allowed")
                } catch let error as SQLiteError {
                    #expect(error.code.primary == .notAuthorized, "\(sql): \(error)")
                }
            }
            try db.execute("PRAGMA temp_store = MEMORY")
            #expect(try db.queryValue("PRAGMA temp_store", as: Int.self) == 2)
        }
    }

    @Test("a refused pragma's error says why, and the next error does not repeat it")
    func refusalReasons() throws {
        let scratch = try Scratch()
        try scratch.run { db in
            let pinned = "temp_store is pinned to MEMORY so that SQLCipher never writes plaintext temporary files"
            let reasons = [
                "PRAGMA temp_store = FILE": "PRAGMA temp_store can only be MEMORY: " + pinned,
                "pragma TEMP_STORE = 0": "PRAGMA temp_store can only be MEMORY: " + pinned,
                "PRAGMA temp_store_directory = '/tmp'": "PRAGMA temp_store_directory is refused: " + pinned,
                "PRAGMA key = 'x'": "PRAGMA key is refused: pass keys through the library (a KeyList or the Keys file), not SQL text",
                "PRAGMA main.hexrekey = '00'": "PRAGMA hexrekey is refused: pass keys through the library",
                "PRAGMA cipher_default_kdf_iter = 1": "PRAGMA cipher_default_kdf_iter is refused: it would change the cipher settings of every connection in the process",
            ]
            for (sql, reason) in reasons {
                do {
                    try db.execute(sql)
                    Issue.record("\(sql) was allowed")
                } catch let error as SQLiteError {
                    #expect(error.code.primary == .notAuthorized)
                    #expect(error.message.hasPrefix("not authorized: " + reason), "\(sql): \(error.message)")
                    #expect(!error.description.contains("'x'"))
                }
            }
            do {
                try db.execute("SELEC 1")
            } catch let error as SQLiteError {
                #expect(!error.message.contains("refused") && !error.message.contains("pinned"), "\(error.message)")
            }
        }
    }

    @Test("write commits on return and rolls back when the closure throws, rethrowing its error")
    func writeTransaction() throws {
        struct Abort: Error, Equatable {}
        let scratch = try Scratch()
        try scratch.database.write { db in try db.execute("CREATE TABLE t(a)") }
        #expect(throws: Abort()) {
            try scratch.database.write { db in
                try db.execute("INSERT INTO t VALUES (1)")
                throw Abort()
            }
        }
        let value = try scratch.database.write { db -> Int in
            try db.execute("INSERT INTO t VALUES (2)")
            return 5
        }
        #expect(value == 5)
        #expect(try scratch.run { try $0.queryValue("SELECT group_concat(a) FROM t", as: String.self) } == "2")
    }
}
