// encryptedsqlite-benchmarks: open-cost measurements, release build.
//
//   swift run -c release encryptedsqlite-benchmarks [runs]
//
// Every figure is a median over `runs` (default 21), measured in this process against the raw
// SQLCipher C API on the same file, so that ratios are comparable on a noisy shared machine.
import CSQLCipher
import EncryptedSQLite
import Foundation

let runs = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 21 : 21
let folder = FileManager.default.temporaryDirectory.appendingPathComponent("encryptedsqlite-bench-\(getpid())").path
try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: folder) }
let path = folder + "/bench.sqlite"
let passphrase = "benchmark passphrase \(UUID().uuidString)"

func median(_ samples: [Duration]) -> Duration { samples.sorted()[samples.count / 2] }
func measure(_ body: () throws -> Void) rethrows -> Duration {
    var samples: [Duration] = []
    for _ in 0..<runs {
        let start = ContinuousClock.now
        try body()
        samples.append(ContinuousClock.now - start)
    }
    return median(samples)
}
func ms(_ duration: Duration) -> String { String(format: "%8.2f ms", duration.milliseconds) }

// The file: on the current key, in WAL mode, with a table.
let keys = try KeyList(database: path, keys: [DatabaseKey(id: "current", source: .passphrase(passphrase))], environment: [:])
do {
    let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(createIfMissing: true, concurrentReaders: 1))
    try database.write { db in try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t(v) VALUES ('x')") }
}

/// Raw C API: open, key with the passphrase, read the schema, close.
func rawOpen() {
    var handle: OpaquePointer?
    sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil)
    _ = passphrase.withCString { sqlite3_key(handle, $0, Int32(strlen($0))) }
    sqlite3_exec(handle, "SELECT count(*) FROM sqlite_master", nil, nil, nil)
    sqlite3_close_v2(handle)
}

/// A key list of its own: its derivation cache starts empty, as in a new process.
func freshKeys() throws -> KeyList {
    try KeyList(database: path, keys: [DatabaseKey(id: "current", source: .passphrase(passphrase))], environment: [:])
}

/// Opens the database and makes `readers` reads overlap, so that the pool opens that many readers.
func openWithPool(readers: Int, keys: KeyList) throws {
    let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(concurrentReaders: readers))
    let inside = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    let group = DispatchGroup()
    for _ in 0..<readers {
        DispatchQueue.global().async(group: group) {
            _ = try? database.read { _ in inside.signal(); release.wait() }
        }
    }
    for _ in 0..<readers { inside.wait() }
    for _ in 0..<readers { release.signal() }
    group.wait()
}

let raw = measure { rawOpen() }
let raw5 = measure { for _ in 0..<5 { rawOpen() } }
let coldOne = try measure { _ = try EncryptedDatabase(path: path, keys: freshKeys()) }
let coldPool = try measure { try openWithPool(readers: 4, keys: freshKeys()) }
let warmOne = try measure { _ = try EncryptedDatabase(path: path, keys: keys) }
let warmPool = try measure { try openWithPool(readers: 4, keys: keys) }

func ratio(_ a: Duration, _ b: Duration) -> String { String(format: "%5.2fx", a.milliseconds / b.milliseconds) }
print("open cost of a file on its current key, passphrase key, median of \(runs) runs")
print("  raw C API: open + key + read schema (one PBKDF2)         \(ms(raw))")
print("  raw C API: 5 connections keyed with the passphrase       \(ms(raw5))   \(ratio(raw5, raw)) raw")
print("  first open in a process (new key list: one PBKDF2)")
print("    EncryptedDatabase, one connection                      \(ms(coldOne))   \(ratio(coldOne, raw)) raw")
print("    EncryptedDatabase + pool of 4 readers, all opened      \(ms(coldPool))   \(ratio(coldPool, coldOne)) one connection")
print("  later opens with the same key list (derivation reused)")
print("    EncryptedDatabase, one connection                      \(ms(warmOne))   \(ratio(warmOne, raw)) raw")
print("    EncryptedDatabase + pool of 4 readers, all opened      \(ms(warmPool))   \(ratio(warmPool, warmOne)) one connection")
