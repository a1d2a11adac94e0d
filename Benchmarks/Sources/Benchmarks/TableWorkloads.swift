import CSQLCipher
import EncryptedSQLite
import Foundation

/// One row of the table of workloads 1–3.
struct Item: Codable, Equatable {
    var id: Int64
    var name: String
    var score: Double
}

/// The same row, also read by position (a hand-written ``RowDecodable`` conformance).
struct RowItem: Codable, Equatable {
    var id: Int64
    var name: String
    var score: Double
}

extension RowItem: RowDecodable {
    static var databaseColumnNames: [String] { ["id", "name", "score"] }
    init(row: StatementRow, columns: RowColumns) throws {
        self.id = try columns.decode(0, in: row)
        self.name = try columns.decode(1, in: row)
        self.score = try columns.decode(2, in: row)
    }
}

/// Workloads 1–3: insert, fetch all, primary-key lookups; raw C and EncryptedSQLite on files keyed
/// with the same raw key (`x'<64 hex>'`, so that no key derivation is timed).
struct TableWorkloads {
    let folder: String
    let rows: Int
    let lookups: Int
    let hexKey: String
    /// The rows, made before anything is timed and shared by both sides.
    let names: [String]
    let lookupIDs: [Int64]

    static let insertSQL = "INSERT INTO items(id, name, score) VALUES (?, ?, ?)"
    static let selectSQL = "SELECT id, name, score FROM items"
    static let lookupSQL = "SELECT id, name, score FROM items WHERE id = ?"

    init(folder: String, rows: Int, lookups: Int, hexKey: String = randomHexKey()) {
        self.folder = folder
        self.hexKey = hexKey
        self.rows = rows
        self.lookups = lookups
        names = (0..<rows).map { "name-\($0)" }
        // The same ids on every run (a fixed seed), so that instruction counts repeat under callgrind.
        var generator = SplitMix64(seed: 6)
        lookupIDs = (0..<lookups).map { _ in Int64.random(in: 1...Int64(rows), using: &generator) }
    }

    var rawKey: String { "x'\(hexKey)'" }

    func keyList(_ path: String) throws -> KeyList {
        try KeyList(database: path, keys: [DatabaseKey(id: "bench", source: .hex(hexKey))], environment: [:])
    }

    func score(_ index: Int) -> Double { Double(index) * 0.5 }

    // MARK: 1. insert

    /// A new file with an empty table; the insert transaction is timed.
    func rawInsert(path: String) throws -> Double {
        try? FileManager.default.removeItem(atPath: path)
        let db = try RawConnection(path: path, key: rawKey, create: true)
        try db.exec("CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, score REAL)")
        let elapsed = try timedRegion {
            try db.exec("BEGIN IMMEDIATE")
            let insert = try db.prepare(Self.insertSQL)
            for index in 0..<rows {
                sqlite3_bind_int64(insert, 1, Int64(index + 1))
                sqlite3_bind_double(insert, 3, score(index))
                guard rawBindTextAndStep(insert, 2, names[index]) == SQLITE_DONE else { throw db.error(sqlite3_errcode(db.handle), Self.insertSQL) }
                sqlite3_reset(insert)
            }
            sqlite3_finalize(insert)
            try db.exec("COMMIT")
        }
        guard try db.integer("SELECT count(*) FROM items") == rows else { throw BenchmarkError("raw insert lost rows") }
        return elapsed
    }

    /// `arrayArguments`: binds `StatementArguments` built from an array literal (the convenient
    /// form) instead of typed values.
    func libraryInsert(path: String, arrayArguments: Bool = false) throws -> Double {
        try? FileManager.default.removeItem(atPath: path)
        let database = try EncryptedDatabase(path: path, keys: keyList(path), options: OpenOptions(createIfMissing: true))
        try database.write { db in try db.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, score REAL)") }
        let elapsed = try timedRegion {
            try database.write { db in
                let insert = try db.prepare(Self.insertSQL)
                if arrayArguments {
                    for index in 0..<rows { try insert.execute([Int64(index + 1), names[index], score(index)]) }
                } else {
                    for index in 0..<rows { try insert.execute(values: Int64(index + 1), names[index], score(index)) }
                }
            }
        }
        let count = try database.read { db in try db.queryValue("SELECT count(*) FROM items", as: Int.self) }
        guard count == rows else { throw BenchmarkError("library insert lost rows") }
        return elapsed
    }

    /// The file workloads 2 and 3 read, made once with the raw C API.
    func makeReadFile(path: String) throws {
        _ = try rawInsert(path: path)
    }

    // MARK: 2. fetch all

    func rawFetchAll(_ db: RawConnection) throws -> [Item] {
        try db.exec("BEGIN")
        defer { try? db.exec("COMMIT") }
        let select = try db.prepare(Self.selectSQL)
        defer { sqlite3_finalize(select) }
        var items: [Item] = []
        while true {
            let code = sqlite3_step(select)
            guard code == SQLITE_ROW else {
                guard code == SQLITE_DONE else { throw db.error(code, Self.selectSQL) }
                break
            }
            items.append(Item(id: sqlite3_column_int64(select, 0), name: rawColumnText(select, 1), score: sqlite3_column_double(select, 2)))
        }
        return items
    }

    func libraryFetchByIndex(_ database: EncryptedDatabase) throws -> [Item] {
        try database.read { db in
            try db.query(Self.selectSQL) { row in
                Item(id: try row.get(0), name: try row.get(1), score: try row.get(2))
            }
        }
    }

    func libraryFetchByName(_ database: EncryptedDatabase) throws -> [Item] {
        try database.read { db in
            try db.query(Self.selectSQL) { row in
                Item(id: try row.get("id"), name: try row.get("name"), score: try row.get("score"))
            }
        }
    }

    /// The convenient form that copies every row into a `Row` first.
    func libraryFetchRows(_ database: EncryptedDatabase) throws -> [Item] {
        try database.read { db in
            try db.query(Self.selectSQL).map { row in
                Item(id: try row.get(0), name: try row.get(1), score: try row.get(2))
            }
        }
    }

    func libraryFetchDecodable(_ database: EncryptedDatabase) throws -> [Item] {
        try database.read { db in try db.query(Item.self, Self.selectSQL) }
    }

    /// The ``RowDecodable`` record: columns resolved once, then read by position.
    func libraryFetchRowDecodable(_ database: EncryptedDatabase) throws -> [RowItem] {
        try database.read { db in try db.query(RowItem.self, Self.selectSQL) }
    }

    // MARK: 3. lookups

    func rawLookups(_ db: RawConnection) throws -> Double {
        try db.exec("BEGIN")
        defer { try? db.exec("COMMIT") }
        let lookup = try db.prepare(Self.lookupSQL)
        defer { sqlite3_finalize(lookup) }
        var total = 0.0
        for id in lookupIDs {
            sqlite3_bind_int64(lookup, 1, id)
            guard sqlite3_step(lookup) == SQLITE_ROW else { throw db.error(sqlite3_errcode(db.handle), Self.lookupSQL) }
            let item = Item(id: sqlite3_column_int64(lookup, 0), name: rawColumnText(lookup, 1), score: sqlite3_column_double(lookup, 2))
            total += item.score + Double(item.name.utf8.count)
            sqlite3_reset(lookup)
        }
        return total
    }

    func libraryLookups(_ database: EncryptedDatabase) throws -> Double {
        try database.read { db in
            let lookup = try db.cachedStatement(Self.lookupSQL)
            var total = 0.0
            for id in lookupIDs {
                let found = try lookup.fetchOne(values: id) { row in
                    Item(id: try row.get(0), name: try row.get(1), score: try row.get(2))
                }
                guard let item = found else { throw BenchmarkError("no row \(id)") }
                total += item.score + Double(item.name.utf8.count)
            }
            return total
        }
    }

    // MARK: Running

    func run(options: Options, report: Report) throws {
        if options.runs(.insert) {
            let samples = try paired(runs: options.runs,
                                     baseline: { try rawInsert(path: folder + "/insert-raw.sqlite") },
                                     library: { try libraryInsert(path: folder + "/insert-lib.sqlite") })
            report.add(.timed(workload: "1 insert \(rows) rows", baseline: "raw C, reused statement", library: "prepare + execute(values:)",
                              samples: samples, target: .ratioAtMost(1.10)))
            let arrays = try paired(runs: options.runs,
                                    baseline: { try rawInsert(path: folder + "/insert-raw.sqlite") },
                                    library: { try libraryInsert(path: folder + "/insert-lib.sqlite", arrayArguments: true) })
            report.add(.timed(workload: "1 insert, array arguments", baseline: "raw C, reused statement", library: "(execute([id, name, score]))",
                              samples: arrays))
        }
        guard options.runs(.fetch) || options.runs(.lookup) else { return }
        let path = folder + "/rows.sqlite"
        try makeReadFile(path: path)
        let raw = try RawConnection(path: path, key: rawKey)
        let database = try EncryptedDatabase(path: path, keys: keyList(path))
        let expected = try rawFetchAll(raw)
        if options.runs(.fetch) {
            /// Checks one variant's rows against the raw C fetch, then times it against raw C.
            func fetchRow<T>(_ name: String, _ library: String, _ target: Target?, _ fetch: (EncryptedDatabase) throws -> [T], items: ([T]) -> [Item]) throws {
                guard items(try fetch(database)) == expected else { throw BenchmarkError("\(name): rows differ from the raw C fetch") }
                var sink = 0
                let samples = try paired(runs: options.runs,
                                         baseline: { try timedRegion { sink &+= try rawFetchAll(raw).count } },
                                         library: { try timedRegion { sink &+= try fetch(database).count } })
                precondition(sink == 2 * options.runs * rows)
                report.add(.timed(workload: name, baseline: "raw C, step + column_*", library: library, samples: samples, target: target))
            }
            let same: ([Item]) -> [Item] = { $0 }
            try fetchRow("2 fetch all, by index", "query { row in row.get(0)… }", .ratioAtMost(1.10), libraryFetchByIndex, items: same)
            try fetchRow("2 fetch all, by name", "query { row in row.get(\"id\")… }", .ratioAtMost(1.10), libraryFetchByName, items: same)
            try fetchRow("2 fetch all, Decodable", "query(Item.self, …)", .ratioAtMost(1.2), libraryFetchDecodable, items: same)
            try fetchRow("2 fetch all, RowDecodable", "query(RowItem.self, …)", .ratioAtMost(1.2), libraryFetchRowDecodable,
                         items: { $0.map { Item(id: $0.id, name: $0.name, score: $0.score) } })
            try fetchRow("2 fetch all, [Row]", "(query(…) → [Row], then map)", nil, libraryFetchRows, items: same)
        }
        if options.runs(.lookup) {
            guard try rawLookups(raw) == libraryLookups(database) else { throw BenchmarkError("lookups differ from the raw C lookups") }
            var sink = 0.0
            let samples = try paired(runs: options.runs,
                                     baseline: { try timedRegion { sink += try rawLookups(raw) } },
                                     library: { try timedRegion { sink += try libraryLookups(database) } })
            precondition(sink > 0)
            report.add(.timed(workload: "3 \(lookups) pk lookups", baseline: "raw C, one read transaction", library: "fetchOne(values: id) { row in … }",
                              samples: samples, target: .ratioAtMost(1.10)))
        }
    }

    /// Runs one variant once (for callgrind), after the same setup every variant has.
    func profile(_ variant: ProfileVariant) throws {
        switch variant {
        case .insertRaw: _ = try rawInsert(path: folder + "/insert-raw.sqlite")
        case .insertLibrary: _ = try libraryInsert(path: folder + "/insert-lib.sqlite")
        case .insertArrays: _ = try libraryInsert(path: folder + "/insert-lib.sqlite", arrayArguments: true)
        default:
            let path = folder + "/rows.sqlite"
            try makeReadFile(path: path)
            let raw = try RawConnection(path: path, key: rawKey)
            let database = try EncryptedDatabase(path: path, keys: keyList(path))
            switch variant {
            case .fetchRaw: _ = try timedRegion { _ = try rawFetchAll(raw) }
            case .fetchIndex: _ = try timedRegion { _ = try libraryFetchByIndex(database) }
            case .fetchName: _ = try timedRegion { _ = try libraryFetchByName(database) }
            case .fetchDecodable: _ = try timedRegion { _ = try libraryFetchDecodable(database) }
            case .fetchRowDecodable: _ = try timedRegion { _ = try libraryFetchRowDecodable(database) }
            case .fetchRows: _ = try timedRegion { _ = try libraryFetchRows(database) }
            case .lookupRaw: _ = try timedRegion { _ = try rawLookups(raw) }
            case .lookupLibrary: _ = try timedRegion { _ = try libraryLookups(database) }
            default: break
            }
        }
    }
}

/// The variants `--profile` runs once, for `valgrind --tool=callgrind`.
enum ProfileVariant: String, CaseIterable {
    case insertRaw = "insert-raw", insertLibrary = "insert-lib", insertArrays = "insert-arrays"
    case fetchRaw = "fetch-raw", fetchIndex = "fetch-index", fetchName = "fetch-name", fetchDecodable = "fetch-decodable"
    case fetchRowDecodable = "fetch-rowdecodable", fetchRows = "fetch-rows"
    case lookupRaw = "lookup-raw", lookupLibrary = "lookup-lib"
    case openOneKey = "open-1key", openFiveKeys = "open-5keys", openPool = "open-pool"
    case openRawEngine = "open-raw-engine", openRawKey = "open-raw-lib", openWrapped = "open-wrapped-lib"
    case concurrencyRawDelete = "concurrency-raw-delete", concurrencyLibraryDelete = "concurrency-lib-delete"
    case concurrencyRawWAL = "concurrency-raw-wal", concurrencyLibraryWAL = "concurrency-lib-wal"

    static var names: [String] { allCases.map(\.rawValue) }
}

/// A small seeded generator (SplitMix64): repeatable pseudo-random ids.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

struct BenchmarkError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
