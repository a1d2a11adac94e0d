import EncryptedSQLite
import Foundation
import Testing
import TestSupport

private struct Boom: Error, Equatable {}

@Suite("Transactions and savepoints")
struct TransactionTests {
    func values(_ db: Connection) throws -> [Int] {
        try db.query("SELECT a FROM t ORDER BY a").map { try $0.get(0, as: Int.self) }
    }

    @Test("commits on return, returns the value; rolls back on throw and rethrows the same error",
          arguments: [TransactionKind.deferred, .immediate, .exclusive])
    func commitAndRollback(kind: TransactionKind) throws {
        let scratch = try Scratch()
        try scratch.run { db in
            try db.execute("CREATE TABLE t(a)")
            let value = try db.transaction(kind) { db -> String in
                try db.execute("INSERT INTO t VALUES (1)")
                return "done"
            }
            #expect(value == "done")
            #expect(throws: Boom()) {
                try db.transaction(kind) { db in
                    try db.execute("INSERT INTO t VALUES (2)")
                    throw Boom()
                }
            }
            #expect(try values(db) == [1])
            #expect(!db.isInTransaction)
        }
    }

    @Test("a nested transaction is a savepoint: its rollback leaves the outer transaction usable")
    func nested() throws {
        let scratch = try Scratch()
        try scratch.run { db in
            try db.execute("CREATE TABLE t(a)")
            try db.transaction(.immediate) { db in
                try db.execute("INSERT INTO t VALUES (1)")
                #expect(throws: Boom()) {
                    try db.transaction { db in
                        try db.execute("INSERT INTO t VALUES (2)")
                        try db.savepoint { db in try db.execute("INSERT INTO t VALUES (3)") }
                        throw Boom()
                    }
                }
                #expect(db.isInTransaction)
                try db.savepoint { db in try db.execute("INSERT INTO t VALUES (4)") }
                #expect(throws: Boom()) { try db.savepoint { db in try db.execute("INSERT INTO t VALUES (5)"); throw Boom() } }
                try db.execute("INSERT INTO t VALUES (6)")
            }
            #expect(try values(db) == [1, 4, 6])
            // The outer rollback undoes released savepoints too.
            #expect(throws: Boom()) {
                try db.transaction { db in
                    try db.savepoint { db in try db.execute("INSERT INTO t VALUES (7)") }
                    throw Boom()
                }
            }
            #expect(try values(db) == [1, 4, 6])
            // A savepoint outside any transaction commits on its own.
            try db.savepoint { db in try db.execute("INSERT INTO t VALUES (8)") }
            #expect(try values(db) == [1, 4, 6, 8])
        }
    }

    @Test("a failing COMMIT (deferred foreign key) rolls back and throws the commit's error")
    func commitFailure() throws {
        let scratch = try Scratch()
        try scratch.run { db in
            try db.execute("PRAGMA foreign_keys = ON; CREATE TABLE p(id INTEGER PRIMARY KEY); CREATE TABLE c(p REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED)")
            #expect {
                try db.transaction { db in try db.execute("INSERT INTO c VALUES (42)") }
            } throws: { ($0 as? SQLiteError)?.code.primary == .constraint }
            #expect(!db.isInTransaction)
            #expect(try db.queryValue("SELECT count(*) FROM c", as: Int.self) == 0)
        }
    }

    @Test("a lock held by another connection surfaces as a typed busy error after the busy timeout")
    func busy() throws {
        let scratch = try Scratch()
        try scratch.run { db in try db.execute("CREATE TABLE t(a)") }
        let other = try EncryptedDatabase(path: scratch.path, keys: scratch.database.keys, options: OpenOptions(busyTimeout: .milliseconds(50)))
        try scratch.run { db in try db.execute("BEGIN IMMEDIATE; INSERT INTO t VALUES (1)") }
        let start = ContinuousClock.now
        #expect {
            try other.writeWithoutTransaction { db in try db.transaction(.immediate) { _ in } }
        } throws: { error in
            guard let error = error as? SQLiteError else { return false }
            return error.code.primary == .busy && error.description.contains("busy timeout")
        }
        #expect(ContinuousClock.now - start >= .milliseconds(40))
        try scratch.run { db in try db.execute("COMMIT") }
        try other.writeWithoutTransaction { db in try db.transaction(.immediate) { db in try db.execute("INSERT INTO t VALUES (2)") } }
    }
}

@Suite("SQL functions and the statement cache")
struct FunctionTests {
    @Test("a Swift closure works as a deterministic scalar SQL function, usable in an index; errors become SQL errors")
    func scalarFunction() throws {
        let scratch = try Scratch()
        try scratch.run { db in
            try db.createFunction("reverse_text", argumentCount: 1, deterministic: true) { arguments in
                guard case .text(let text) = arguments[0] else { return DatabaseValue.null }
                return String(text.reversed())
            }
            try db.createFunction("fail", argumentCount: 0) { _ in throw Boom() }
            #expect(try db.queryValue("SELECT reverse_text('abc')", as: String.self) == "cba")
            #expect(try db.queryValue("SELECT reverse_text(NULL)", as: String.self) == nil)
            try db.execute("CREATE TABLE t(a TEXT); CREATE INDEX t_rev ON t(reverse_text(a)); INSERT INTO t VALUES ('xyz')")
            #expect(try db.queryValue("SELECT a FROM t WHERE reverse_text(a) = 'zyx'", as: String.self) == "xyz")
            #expect(throws: SQLiteError.self) { try db.execute("SELECT fail()") }
        }
    }

    @Test("cachedStatement returns the same prepared statement, reset and unbound")
    func cache() throws {
        let scratch = try Scratch()
        try scratch.run { db in
            try db.execute("CREATE TABLE t(a)")
            let first = try db.cachedStatement("INSERT INTO t VALUES (?)")
            try first.execute([1])
            let second = try db.cachedStatement("INSERT INTO t VALUES (?)")
            #expect(first === second)
            try second.execute([2])
            #expect(try db.queryValue("SELECT sum(a) FROM t", as: Int.self) == 3)
        }
    }
}
