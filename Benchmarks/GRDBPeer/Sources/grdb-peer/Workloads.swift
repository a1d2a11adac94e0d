import Foundation
import GRDB
import GRDBSQLite

func median(_ samples: [Double]) -> Double {
    let sorted = samples.sorted()
    guard !sorted.isEmpty else { return .nan }
    let middle = sorted.count / 2
    return sorted.count.isMultiple(of: 2) ? (sorted[middle - 1] + sorted[middle]) / 2 : sorted[middle]
}

/// Runs baseline and library alternately (the baseline first on even runs).
func paired(runs: Int, baseline: () throws -> Double, library: () throws -> Double) rethrows -> (baseline: [Double], library: [Double]) {
    var base: [Double] = []
    var lib: [Double] = []
    for run in 0..<runs {
        if run.isMultiple(of: 2) {
            base.append(try baseline())
            lib.append(try library())
        } else {
            lib.append(try library())
            base.append(try baseline())
        }
    }
    return (base, lib)
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// Runs async work from synchronous code; the calling thread waits.
func waitFor<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        do { box.result = .success(try await body()) } catch { box.result = .failure(error) }
        done.signal()
    }
    done.wait()
    return try box.result!.get()
}

/// Carries a result from a task to the thread waiting for it (the semaphore orders the accesses).
final class ResultBox<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}

struct Workloads {
    let folder: String
    let runs: Int
    let rows: Int
    static let initialRows = 10_000
    static let opsPerTask = 200
    static let insertSQL = "INSERT INTO items(name, score) VALUES (?, ?)"
    static let lookupSQL = "SELECT id, name, score FROM items WHERE id = ?"

    /// A fresh file with `initialRows` rows, in WAL or DELETE journal mode (made with the C API).
    func makeFile(_ path: String, wal: Bool, rows: Int = Self.initialRows) throws {
        for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        let db = try RawConnection(path: path)
        try db.exec("""
            PRAGMA journal_mode = \(wal ? "WAL" : "DELETE");
            CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, score REAL);
            BEGIN;
            WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < \(rows))
            INSERT INTO items(name, score) SELECT 'name-' || x, x * 0.5 FROM n;
            COMMIT;
            """)
    }

    static func lookupID(task: Int, op: Int) -> Int64 { Int64(1 + (task * 7919 + op * 104_729) % initialRows) }

    // MARK: Workload 7

    func concurrency(writers: Int, readers: Int, wal: Bool) throws -> (baseline: [Double], library: [Double]) {
        let total = Double((writers + readers) * Self.opsPerTask)
        return try paired(runs: runs, baseline: {
            let path = folder + "/concurrency-raw.sqlite"
            try makeFile(path, wal: wal)
            let shared = try SharedRawConnection(path: path)
            let group = DispatchGroup()
            let start = ContinuousClock.now
            for task in 0..<(writers + readers) {
                group.enter()
                Thread {
                    for op in 0..<Self.opsPerTask {
                        if task < writers {
                            try! shared.insert(name: "task-\(task)-\(op)", score: Double(op))
                        } else {
                            try! shared.lookup(id: Self.lookupID(task: task, op: op))
                        }
                    }
                    group.leave()
                }.start()
            }
            group.wait()
            return total / (ContinuousClock.now - start).seconds
        }, library: {
            let path = folder + "/concurrency-grdb.sqlite"
            try makeFile(path, wal: wal)
            let writer: any DatabaseWriter
            if wal {
                var configuration = Configuration()
                configuration.maximumReaderCount = 4
                writer = try DatabasePool(path: path, configuration: configuration)
            } else {
                writer = try DatabaseQueue(path: path)
            }
            let seconds = try waitFor {
                let start = ContinuousClock.now
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for task in 0..<(writers + readers) {
                        group.addTask {
                            for op in 0..<Self.opsPerTask {
                                if task < writers {
                                    try await writer.write { db in
                                        try db.cachedStatement(sql: Self.insertSQL).execute(arguments: ["task-\(task)-\(op)", Double(op)])
                                    }
                                } else {
                                    let id = Self.lookupID(task: task, op: op)
                                    _ = try await writer.read { db in
                                        try Row.fetchOne(db.cachedStatement(sql: Self.lookupSQL), arguments: [id]).map { row in
                                            Item(id: row[0], name: row[1], score: row[2])
                                        }
                                    }
                                }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                return (ContinuousClock.now - start).seconds
            }
            let count = try writer.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM items") }
            guard count == Self.initialRows + writers * Self.opsPerTask else { throw RawError(description: "GRDB lost rows") }
            return total / seconds
        })
    }

    // MARK: The fetch

    enum FetchVariant: String, CaseIterable {
        case byIndex = "GRDB Row cursor, row[0]…"
        case decodable = "GRDB Item.fetchAll (Decodable)"
    }

    func fetch(_ variant: FetchVariant) throws -> (baseline: [Double], library: [Double]) {
        let path = folder + "/rows.sqlite"
        if !FileManager.default.fileExists(atPath: path) { try makeFile(path, wal: false, rows: rows) }
        let raw = try RawConnection(path: path)
        let queue = try DatabaseQueue(path: path)
        return try paired(runs: runs, baseline: {
            let start = ContinuousClock.now
            try raw.exec("BEGIN")
            let select = try raw.prepare("SELECT id, name, score FROM items")
            var items: [Item] = []
            while sqlite3_step(select) == SQLITE_ROW {
                items.append(Item(id: sqlite3_column_int64(select, 0), name: columnText(select, 1), score: sqlite3_column_double(select, 2)))
            }
            sqlite3_finalize(select)
            try raw.exec("COMMIT")
            guard items.count == rows else { throw RawError(description: "raw fetch read \(items.count)") }
            return (ContinuousClock.now - start).seconds * 1000
        }, library: {
            let start = ContinuousClock.now
            let items: [Item] = try queue.read { db in
                switch variant {
                case .byIndex:
                    var items: [Item] = []
                    let cursor = try Row.fetchCursor(db, sql: "SELECT id, name, score FROM items")
                    while let row = try cursor.next() { items.append(Item(id: row[0], name: row[1], score: row[2])) }
                    return items
                case .decodable:
                    return try Item.fetchAll(db, sql: "SELECT id, name, score FROM items")
                }
            }
            guard items.count == rows else { throw RawError(description: "GRDB fetch read \(items.count)") }
            return (ContinuousClock.now - start).seconds * 1000
        })
    }
}
