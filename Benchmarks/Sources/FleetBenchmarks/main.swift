// encryptedsqlite-fleet-benchmarks: the fleet figures of issue 22 (release build; see Benchmarks/README.md).
//
//   scripts/fleet-bench.sh                      (or: make bench-fleet; SQLCipher 4: make bench-fleet4)
//   swift run -c release encryptedsqlite-fleet-benchmarks [--databases N] [--opens N] [--only rewrap,open,token] …
//
// a. a fleet of small databases, each with its own wrapped data key in one Keys file: a master-key
//    rotation (rewrap every data key, no database touched) against re-encrypting every database;
// b. opening many databases in one process: wrapped data keys against passphrases;
// c. data keys unwrapped by a PKCS#11 token (SoftHSM2): time per unwrap and per open.
// Prints a table with each goal and whether it is met, and writes a JSON file.
import CSQLCipher
import EncryptedSQLite
import Foundation

let options: FleetOptions
do {
    options = try FleetOptions.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("\(error)\n\(FleetOptions.usage)\n".utf8))
    exit(64)
}

let folder = FileManager.default.temporaryDirectory.appendingPathComponent("encryptedsqlite-fleet-bench-\(getpid())").path
try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: folder) }

do {
    let engine = SQLCipherEngine.linked.version
    say("EncryptedSQLite fleet benchmarks: SQLCipher \(engine) (SQLite \(String(cString: sqlite3_libversion()))), \(ProcessInfo.processInfo.activeProcessorCount) cores")
    say(ResultsTable.header)
    let report = ResultsTable()
    if options.runs("rewrap") { try RewrapWorkload(folder: folder + "/rewrap", options: options, report: report).run() }
    if options.runs("keys") { try RewrapWorkload(folder: folder + "/keys", options: options, report: report, makesDatabases: false).run() }
    if options.runs("open") { try OpenWorkload(folder: folder + "/open", options: options, report: report).run() }
    if options.runs("token") && options.tokenOpens > 0 { try TokenWorkload(folder: folder + "/token", options: options, report: report).run() }
    try report.writeJSON(to: options.jsonPath, engine: engine, settings: options.settings)
    say("results: \(options.jsonPath)")
} catch {
    FileHandle.standardError.write(Data("fleet benchmark failed: \(error)\n".utf8))
    try? FileManager.default.removeItem(atPath: folder)
    exit(1)
}
