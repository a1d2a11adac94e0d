import CSQLCipher
import EncryptedSQLite
import Foundation

/// Issue 24's candidates, one at a time, single-threaded (`--only candidates`): the cost per
/// operation of each layer workload 7 goes through, in microseconds, on a WAL file of workload 7's
/// shape. Each row compares two variants that differ in one layer only:
/// - the live-rotation check: a raw read transaction with and without `PRAGMA schema_version`;
/// - a read through the library (blocking API) on the writer and on a pooled reader, against raw C;
/// - the async hop: the async read against the blocking one, both on the pool;
/// - a write transaction (commit and fsync included): raw C against the library's blocking write.
struct CandidateWorkload {
    let folder: String
    let runs: Int
    let reads = 20_000
    let writes = 300

    func run(report: Report) throws {
        let shape = ConcurrencyWorkload(folder: folder, writers: 0, readers: 0, opsPerTask: 0, runs: 0, poolReaders: 4)
        let path = folder + "/candidates.sqlite"
        try shape.makeFile(path, wal: true)
        let raw = try SharedRawConnection(path: path, key: "x'\(shape.hexKey)'")
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "bench", source: .hex(shape.hexKey))], environment: [:])
        let writer = try EncryptedDatabase(path: path, keys: keys)
        let pooled = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(concurrentReaders: 4))
        @Sendable func id(_ op: Int) -> Int64 { Int64(1 + (op * 104_729) % ConcurrencyWorkload.initialRows) }
        func perRead(_ body: (Int) throws -> Void) rethrows -> Double {
            let seconds = try timedRegion { for op in 0..<reads { try body(op) } }
            return seconds / Double(reads) * 1e6
        }
        func libraryRead(_ database: EncryptedDatabase, _ op: Int) throws {
            _ = try database.read { db in
                try db.cachedStatement(ConcurrencyWorkload.lookupSQL).fetchOne(values: id(op)) { row in
                    Item(id: try row.get(0), name: try row.get(1), score: try row.get(2))
                }
            }
        }
        let lookup = { (op: Int) in try raw.lookup(id: id(op)) }
        let checked = { (op: Int) in try raw.lookup(id: id(op), checkSchemaVersion: true) }
        add(report, "24 read txn + schema_version", "raw C read transaction", "raw C + PRAGMA schema_version",
            try paired(runs: runs, baseline: { try perRead(lookup) }, library: { try perRead(checked) }))
        add(report, "24 read, writer (no pool)", "raw C read transaction", "read { } on the writer",
            try paired(runs: runs, baseline: { try perRead(lookup) }, library: { try perRead { try libraryRead(writer, $0) } }))
        add(report, "24 read, pooled reader", "raw C read transaction", "read { } on a pooled reader",
            try paired(runs: runs, baseline: { try perRead(lookup) }, library: { try perRead { try libraryRead(pooled, $0) } }))
        let asyncRead = {
            try waitFor {
                let start = ContinuousClock.now
                for op in 0..<reads {
                    _ = try await pooled.read { db in
                        try db.cachedStatement(ConcurrencyWorkload.lookupSQL).fetchOne(values: id(op)) { row in
                            Item(id: try row.get(0), name: try row.get(1), score: try row.get(2))
                        }
                    }
                }
                return (ContinuousClock.now - start).seconds / Double(reads) * 1e6
            }
        }
        add(report, "24 async hop, pooled read", "blocking read { }", "try await read { }",
            try paired(runs: runs, baseline: { try perRead { try libraryRead(pooled, $0) } }, library: asyncRead))
        let rawWrite = {
            try timedRegion { for op in 0..<writes { try raw.insert(name: "raw-\(op)", score: Double(op)) } } / Double(writes) * 1e6
        }
        let libraryWrite = {
            try timedRegion {
                for op in 0..<writes {
                    try writer.write { db in try db.cachedStatement(ConcurrencyWorkload.insertSQL).execute(values: "lib-\(op)", Double(op)) }
                }
            } / Double(writes) * 1e6
        }
        add(report, "24 write txn (commit, fsync)", "raw C BEGIN IMMEDIATE…COMMIT", "write { } on the writer",
            try paired(runs: runs, baseline: rawWrite, library: libraryWrite))
    }

    private func add(_ report: Report, _ workload: String, _ baseline: String, _ library: String, _ samples: (baseline: [Double], library: [Double])) {
        report.add(ResultRow(workload: workload, baseline: baseline, library: library, unit: "µs",
                             baselineSamples: samples.baseline, librarySamples: samples.library,
                             notes: ["meaning": "microseconds per operation, one thread; ratio = the library column's cost / the baseline's"]))
    }
}
