import CSQLCipher
import EncryptedSQLite
import Foundation

/// Workloads 4 and 5: what opening costs with passphrase keys (one PBKDF2 of 64,000 iterations per
/// passphrase tried), against the raw C API doing the same trials.
///
/// Every library open uses a key list built for that open, so that nothing derived by an earlier
/// open is reused: each measured open costs what the first open in a new process costs.
struct OpenWorkloads {
    let folder: String
    let runs: Int
    let poolReaders: Int
    /// Five passphrases, oldest first; the last is current.
    let passphrases = (0..<5).map { _ in randomPassphrase() }

    var current: String { passphrases[4] }
    var oldest: String { passphrases[0] }
    var currentFile: String { folder + "/open-current.sqlite" }
    var oldestFile: String { folder + "/open-oldest.sqlite" }

    /// A key list of its own (an empty derivation cache, as in a new process).
    func keys(_ path: String, count: Int) throws -> KeyList {
        let chosen = passphrases.suffix(count)
        return try KeyList(database: path, keys: chosen.enumerated().map { DatabaseKey(id: "k\($0.offset)", source: .passphrase($0.element)) },
                           environment: [:])
    }

    /// Both files, in WAL mode with one small table: one on the current key, one on the oldest.
    func makeFiles() throws {
        for (path, passphrase) in [(currentFile, current), (oldestFile, oldest)] {
            try? FileManager.default.removeItem(atPath: path)
            let db = try RawConnection(path: path, key: passphrase, create: true)
            try db.exec("PRAGMA journal_mode = WAL; CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t(v) VALUES ('x')")
        }
    }

    /// Raw C: open, key with `passphrase`, read the schema; `true` when the key opened the file.
    func rawTrial(_ path: String, _ passphrase: String) -> Bool {
        guard let db = try? RawConnection(path: path, key: passphrase) else { return false }
        return (try? db.verifyReadable()) != nil
    }

    func run(options: Options, report: Report) throws {
        try makeFiles()
        if options.runs(.openRaw) {
            try RawKeyOpens(folder: folder, runs: runs).run(report: report)
        }
        if options.runs(.open) {
            // 4a: a current-key file, 1-key list, against the raw C open.
            let one = try paired(runs: runs,
                                 baseline: { timedRegion { precondition(rawTrial(currentFile, current)) } },
                                 library: { try openSeconds(currentFile, keys(currentFile, count: 1)) })
            report.add(.timed(workload: "4 open, current key, 1 key", baseline: "raw C open+key+read", library: "EncryptedDatabase, 1 passphrase",
                              samples: one))
            // 4b: the same file with a 5-passphrase list, against the 1-key open.
            let five = try paired(runs: runs,
                                  baseline: { try openSeconds(currentFile, keys(currentFile, count: 1)) },
                                  library: { try openSeconds(currentFile, keys(currentFile, count: 5)) })
            report.add(.timed(workload: "4 open, current key, 5 keys", baseline: "EncryptedDatabase, 1 passphrase", library: "EncryptedDatabase, 5 passphrases",
                              samples: five, target: .ratioAtMost(1.05)))
            // 4c: a file on the oldest of 5 passphrases (opened without rotating, so that every run
            // opens the same file), against raw C trying the same keys in the same order.
            var attempts = 0
            let old = try paired(runs: runs,
                                 baseline: { timedRegion { precondition(!rawTrial(oldestFile, current) && rawTrial(oldestFile, oldest)) } },
                                 library: {
                                     let keys = try keys(oldestFile, count: 5)
                                     var seconds = 0.0
                                     seconds = try timedRegion {
                                         let database = try EncryptedDatabase(path: oldestFile, keys: keys, options: OpenOptions(rotateToCurrentKey: false))
                                         attempts = database.report.attempts.count
                                     }
                                     return seconds
                                 })
            let kdfTime = median(one.baseline)
            report.add(.timed(workload: "4 open, oldest of 5 keys", baseline: "raw C: current, then oldest", library: "EncryptedDatabase, no rotation",
                              samples: old, notes: [
                                  "keysTried": "\(attempts)",
                                  "kdfRuns": "\(attempts) (one PBKDF2 per passphrase tried: current first, then oldest)",
                                  "kdfRunsEstimatedFromTime": String(format: "%.2f", median(old.library) / kdfTime),
                              ]))
            print(String(format: "    keys tried (= KDF runs) on the oldest-key file: %d; open time / one raw open = %.2f", attempts, median(old.library) / kdfTime))
        }
        if options.runs(.pool) {
            let pool = try paired(runs: runs,
                                  baseline: { try openSeconds(currentFile, keys(currentFile, count: 1)) },
                                  library: { try poolSeconds(currentFile, keys(currentFile, count: 1)) })
            report.add(.timed(workload: "5 open + pool of \(poolReaders) readers", baseline: "EncryptedDatabase, 1 connection", library: "\(poolReaders) readers opened and used",
                              samples: pool, target: .ratioAtMost(1.2)))
            let raw = paired(runs: runs,
                                 baseline: { timedRegion { precondition(rawTrial(currentFile, current)) } },
                                 library: { timedRegion { for _ in 0...poolReaders { precondition(rawTrial(currentFile, current)) } } })
            report.add(.timed(workload: "5 raw: \(poolReaders + 1) keyed connections", baseline: "raw C, 1 connection", library: "(raw C, \(poolReaders + 1) passphrase opens)",
                              samples: raw, notes: ["meaning": "what a pool keyed with the passphrase would cost: one KDF per connection"]))
        }
    }

    /// Runs one open variant once (for callgrind), after the same setup every variant has.
    func profile(_ variant: ProfileVariant) throws {
        try makeFiles()
        switch variant {
        case .openOneKey: _ = try openSeconds(currentFile, keys(currentFile, count: 1))
        case .openFiveKeys: _ = try openSeconds(currentFile, keys(currentFile, count: 5))
        case .openPool: _ = try poolSeconds(currentFile, keys(currentFile, count: 1))
        case .openRawEngine, .openRawKey, .openWrapped: try RawKeyOpens(folder: folder, runs: 1).profile(variant)
        default: break
        }
    }

    /// Opens the database (and closes it); the open is timed.
    func openSeconds(_ path: String, _ keys: KeyList) throws -> Double {
        try timedRegion { _ = try EncryptedDatabase(path: path, keys: keys) }
    }

    /// Opens the database with a reader pool and makes `poolReaders` reads overlap, so that the pool
    /// opens every reader; the whole is timed.
    func poolSeconds(_ path: String, _ keys: KeyList) throws -> Double {
        try timedRegion {
            let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(concurrentReaders: poolReaders))
            let inside = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let group = DispatchGroup()
            let failures = Failures()
            for _ in 0..<poolReaders {
                DispatchQueue.global().async(group: group) {
                    do {
                        try database.read { _ in inside.signal(); release.wait() }
                    } catch {
                        failures.add(error)
                        inside.signal()
                    }
                }
            }
            for _ in 0..<poolReaders { inside.wait() }
            for _ in 0..<poolReaders { release.signal() }
            group.wait()
            try failures.check()
        }
    }
}

/// Errors from other threads, rethrown on the caller's.
final class Failures: @unchecked Sendable {
    private let lock = NSLock()
    private var errors: [any Error] = []
    func add(_ error: any Error) { lock.withLock { errors.append(error) } }
    func check() throws { if let first = lock.withLock({ errors.first }) { throw first } }
}

/// Workload 4d (issue 34): opening a current file keyed with a raw key, the way a service opens
/// tenant databases whose data keys it holds: no key derivation on either side, so what is
/// measured is the open path itself. In one run, interleaved (the order rotates from run to run):
/// - the engine: `sqlite3_open_v2`, `sqlite3_key` with `x'<64 hex>'`, the first read
///   (`SELECT count(*) FROM t`), `sqlite3_close_v2`;
/// - the library with the raw key: a `KeyList` with one `hex` key, `EncryptedDatabase(path:keys:)`,
///   the same read through `read { }`, the database released;
/// - the library with a wrapped data key: the same, the key list unwrapping an AES-256-GCM value
///   with a KEK held by the process (its derivation, once per process, is not timed), a new
///   `KeyEncryptionKeyList` per open so that nothing unwrapped before is reused.
/// Each sample is `batch` opens of the same file, so that the clock's resolution does not matter.
struct RawKeyOpens {
    let folder: String
    let runs: Int
    let batch = 20
    let dataKey = DataKey.random()
    /// The KEK, held by the process (no derivation). Each open gets a list of its own, because a
    /// `KeyEncryptionKeyList` keeps what it unwrapped: every timed wrapped open runs AES-GCM once.
    let kek = LocalKeyEncryptionKey(id: "kek", key: DataKey.random())
    var keyEncryptionKeys: KeyEncryptionKeyList { KeyEncryptionKeyList([kek]) }

    var path: String { folder + "/open-rawkey.sqlite" }
    var hexDigits: String { dataKey.withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() } }

    func makeFile() throws {
        try? FileManager.default.removeItem(atPath: path)
        let db = try RawConnection(path: path, key: "x'\(hexDigits)'", create: true)
        try db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t(v) VALUES ('x')")
    }

    func run(report: Report) throws {
        try makeFile()
        let hex = hexDigits, rawText = "x'\(hexDigits)'"
        let wrapped = try keyEncryptionKeys.wrap(dataKey, dataKeyID: "data-1")
        var engine: [Double] = [], library: [Double] = [], libraryWrapped: [Double] = []
        let sides: [() throws -> Void] = [
            { engine.append(try timedRegion { for _ in 0..<batch { try engineOpen(rawText) } } / Double(batch)) },
            { library.append(try timedRegion { for _ in 0..<batch { try libraryOpen(.hex(hex)) } } / Double(batch)) },
            { libraryWrapped.append(try timedRegion { for _ in 0..<batch { try libraryOpen(.wrapped(wrapped)) } } / Double(batch)) },
        ]
        for _ in 0..<2 { for side in sides { try side() } }  // warm-up, not kept
        engine = []; library = []; libraryWrapped = []
        for run in 0..<runs {
            for offset in 0..<sides.count { try sides[(run + offset) % sides.count]() }
        }
        let note = ["opensPerSample": "\(batch)", "meaning": "ms per open: open, key, first read, close"]
        report.add(.timed(workload: "4d open, raw key, current file", baseline: "raw C open+key+read", library: "EncryptedDatabase, 1 raw key",
                          samples: (engine, library), target: .ratioAtMost(1.2), notes: note))
        report.add(.timed(workload: "4d open, wrapped data key", baseline: "raw C open+key+read", library: "EncryptedDatabase, 1 wrapped key",
                          samples: (engine, libraryWrapped), target: .ratioAtMost(1.2), notes: note))
    }

    /// One variant, 2,000 opens of the same file, for callgrind (`RawKeyOpens.libraryOpen` or
    /// `engineOpen` inclusive, divided by 2,000, is the cost of one open).
    func profile(_ variant: ProfileVariant) throws {
        try makeFile()
        let wrapped = try keyEncryptionKeys.wrap(dataKey, dataKeyID: "data-1")
        let hex = hexDigits, rawText = "x'\(hexDigits)'"
        for _ in 0..<2000 {
            switch variant {
            case .openRawEngine: try engineOpen(rawText)
            case .openRawKey: try libraryOpen(.hex(hex))
            case .openWrapped: try libraryOpen(.wrapped(wrapped))
            default: return
            }
        }
    }

    func engineOpen(_ key: String) throws {
        let db = try RawConnection(path: path, key: key)
        guard try db.integer("SELECT count(*) FROM t") == 1 else { throw BenchmarkError("\(path): wrong row count") }
    }

    func libraryOpen(_ source: KeySource) throws {
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "data-1", source: source)], keyEncryptionKeys: keyEncryptionKeys)
        let database = try EncryptedDatabase(path: path, keys: keys)
        guard try database.read({ try $0.queryValue("SELECT count(*) FROM t", as: Int.self) }) == 1 else {
            throw BenchmarkError("\(path): wrong row count")
        }
    }
}
