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

/// Opens the database and makes `readers` reads overlap, so that the pool opens that many readers.
func openWithPool(readers: Int) throws {
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
let one = try measure { _ = try EncryptedDatabase(path: path, keys: keys) }
let pool4 = try measure { try openWithPool(readers: 4) }
let raw4 = measure { for _ in 0..<5 { rawOpen() } }

print("open cost, passphrase key (one PBKDF2 = the bulk of a raw open), median of \(runs) runs")
print("  raw C API: open + key + read schema          \(ms(raw))")
print("  EncryptedDatabase, one connection            \(ms(one))   \(String(format: "%.2f", one.milliseconds / raw.milliseconds))x raw")
print("  EncryptedDatabase + pool of 4 readers open   \(ms(pool4))   \(String(format: "%.2f", pool4.milliseconds / one.milliseconds))x one connection")
print("  raw C API, 5 connections keyed with the passphrase \(ms(raw4))   (what 4 readers would cost without the derived key)")
