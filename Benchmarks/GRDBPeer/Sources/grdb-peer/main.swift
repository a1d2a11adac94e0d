// grdb-peer: GRDB 7.10 next to raw C on the same libsqlite3 (issue 24). Workload 7 (8 writer
// tasks + 8 reader tasks; 1 writer + 16 readers) with DatabaseQueue (DELETE) and DatabasePool (WAL,
// 4 readers) against one raw connection behind a mutex, and the 200,000-row fetch, as in
// EncryptedSQLite's benchmark (Benchmarks/README.md). Prints one table; ratios are same-run.
import Foundation
import GRDB
import GRDBSQLite

struct Item: Codable, FetchableRecord {
    var id: Int64
    var name: String
    var score: Double
}

var runs = 7
var rows = 200_000
var arguments = Array(CommandLine.arguments.dropFirst())
while !arguments.isEmpty {
    let option = arguments.removeFirst()
    switch (option, arguments.first.flatMap(Int.init)) {
    case ("--runs", let value?): runs = value; arguments.removeFirst()
    case ("--rows", let value?): rows = value; arguments.removeFirst()
    default:
        print("usage: grdb-peer [--runs N] [--rows N]")
        exit(option == "--help" ? 0 : 64)
    }
}

let folder = FileManager.default.temporaryDirectory.appendingPathComponent("grdb-peer-\(getpid())").path
try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: folder) }

print("GRDB 7.10 peer: SQLite \(String(cString: sqlite3_libversion())) (libsqlite3, no encryption), \(ProcessInfo.processInfo.activeProcessorCount) cores, \(runs) interleaved runs")
let workloads = Workloads(folder: folder, runs: runs, rows: rows)
func report(_ workload: String, _ baseline: String, _ library: String, _ unit: String, _ samples: (baseline: [Double], library: [Double])) {
    let (base, lib) = (median(samples.baseline), median(samples.library))
    let line = [workload.padding(toLength: 30, withPad: " ", startingAt: 0), baseline.padding(toLength: 32, withPad: " ", startingAt: 0),
                library.padding(toLength: 30, withPad: " ", startingAt: 0),
                String(format: "%10.1f %@ %10.1f %@ %6.2fx", base, unit, lib, unit, lib / base)].joined(separator: " ")
    print(line)
    fflush(nil)
}
for (writers, readers) in [(8, 8), (1, 16)] {
    for wal in [false, true] where wal || writers == 8 {
        let name = "7 \(writers)w+\(readers)r, \(wal ? "WAL" : "DELETE")"
        report(name, "raw C, 1 handle + mutex", wal ? "GRDB DatabasePool (4 readers)" : "GRDB DatabaseQueue", "ops/s",
               try workloads.concurrency(writers: writers, readers: readers, wal: wal))
    }
}
for variant in Workloads.FetchVariant.allCases {
    report("2 fetch \(rows) rows", "raw C, step + column_*", variant.rawValue, "ms", try workloads.fetch(variant))
}
