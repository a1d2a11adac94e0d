import Foundation
import GRDBSQLite

/// SQLite's "copy this buffer now" destructor (the C macro `SQLITE_TRANSIENT`).
let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

struct RawError: Error, CustomStringConvertible {
    let description: String
}

/// One raw libsqlite3 connection: the baselines' C API calls.
final class RawConnection {
    let handle: OpaquePointer

    init(path: String) throws {
        var db: OpaquePointer?
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK, let db else {
            throw RawError(description: "cannot open \(path)")
        }
        handle = db
        sqlite3_busy_timeout(db, 5000)
    }

    deinit { sqlite3_close_v2(handle) }

    func exec(_ sql: String) throws {
        guard sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK else { throw error(sql) }
    }

    func prepare(_ sql: String) throws -> OpaquePointer {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else { throw error(sql) }
        return statement
    }

    func error(_ sql: String) -> RawError {
        RawError(description: "SQLite error \(sqlite3_errcode(handle)): \(String(cString: sqlite3_errmsg(handle))) — in: \(sql)")
    }
}

func columnText(_ statement: OpaquePointer, _ index: Int32) -> String {
    guard let text = sqlite3_column_text(statement, index) else { return "" }
    return String(cString: text)
}

/// One raw connection behind a mutex: the C baseline of workload 7 (as in the main benchmark).
final class SharedRawConnection: @unchecked Sendable {
    private let lock = NSLock()
    // Invariant: `db` and the statements are only used with `lock` held.
    private let db: RawConnection
    private let insertStatement: OpaquePointer
    private let lookupStatement: OpaquePointer

    init(path: String) throws {
        db = try RawConnection(path: path)
        insertStatement = try db.prepare(Workloads.insertSQL)
        lookupStatement = try db.prepare(Workloads.lookupSQL)
    }

    deinit {
        sqlite3_finalize(insertStatement)
        sqlite3_finalize(lookupStatement)
    }

    func insert(name: String, score: Double) throws {
        try lock.withLock {
            try db.exec("BEGIN IMMEDIATE")
            sqlite3_bind_text(insertStatement, 1, name, -1, transient)
            sqlite3_bind_double(insertStatement, 2, score)
            let code = sqlite3_step(insertStatement)
            sqlite3_reset(insertStatement)
            guard code == SQLITE_DONE else {
                try? db.exec("ROLLBACK")
                throw db.error(Workloads.insertSQL)
            }
            try db.exec("COMMIT")
        }
    }

    func lookup(id: Int64) throws {
        try lock.withLock {
            try db.exec("BEGIN")
            defer { try? db.exec("COMMIT") }
            sqlite3_bind_int64(lookupStatement, 1, id)
            defer { sqlite3_reset(lookupStatement) }
            guard sqlite3_step(lookupStatement) == SQLITE_ROW else { throw db.error(Workloads.lookupSQL) }
            _ = Item(id: sqlite3_column_int64(lookupStatement, 0), name: columnText(lookupStatement, 1), score: sqlite3_column_double(lookupStatement, 2))
        }
    }
}
