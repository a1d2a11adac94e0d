// encryptedsqlite-benchmarks: issue 6's benchmark suite (release build; see Benchmarks/README.md).
//
//   scripts/bench.sh            (or: make bench)
//   swift run -c release encryptedsqlite-benchmarks [--runs N] [--rotation-mb N] [--only insert,fetch] …
//
// Every workload runs EncryptedSQLite next to an equivalent raw C baseline (the SQLCipher C API
// through CSQLCipher, same engine, same key, same cipher settings, same SQL) in this process, and
// every figure is a median of runs interleaved with the baseline's, so that the ratios hold on a
// shared, noisy machine. Prints a table and writes a JSON file of medians and ratios.
import CSQLCipher
import EncryptedSQLite
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())

if arguments.first == "__rotation-child" {
    do {
        try RotationWorkload.child(arguments: Array(arguments.dropFirst()))
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("rotation child: \(error)\n".utf8))
        exit(1)
    }
}

if arguments.first == "__memory-child" {
    do {
        try MemoryWorkload.child(arguments: Array(arguments.dropFirst()))
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("memory child: \(error)\n".utf8))
        exit(1)
    }
}

let options: Options
do {
    options = try Options.parse(arguments)
} catch {
    FileHandle.standardError.write(Data("\(error)\n\(Options.usage)\n".utf8))
    exit(64)
}

let folder = FileManager.default.temporaryDirectory.appendingPathComponent("encryptedsqlite-bench-\(getpid())").path
try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: folder) }

do {
    if let name = options.profile {
        guard let variant = ProfileVariant(rawValue: name) else { throw UsageError("unknown profile variant \(name)") }
        switch variant {
        case .openOneKey, .openFiveKeys, .openPool, .openRawEngine, .openRawKey, .openWrapped:
            try OpenWorkloads(folder: folder, runs: 1, poolReaders: options.poolReaders).profile(variant)
        case .concurrencyRawDelete, .concurrencyLibraryDelete, .concurrencyRawWAL, .concurrencyLibraryWAL:
            try ConcurrencyWorkload(folder: folder, writers: options.writers, readers: options.readers, opsPerTask: options.opsPerTask,
                                    runs: 1, poolReaders: options.poolReaders, writerOnExecutor: options.writerExecutor).profile(variant)
        default:
            try TableWorkloads(folder: folder, rows: options.rows, lookups: options.lookups).profile(variant)
        }
        exit(0)
    }

    let report = Report()
    let engine = SQLCipherEngine.linked.version
    let sqlite = String(cString: sqlite3_libversion())
    print("EncryptedSQLite benchmarks: SQLCipher \(engine) (SQLite \(sqlite)), \(ProcessInfo.processInfo.activeProcessorCount) cores")
    print("medians of interleaved runs; each ratio is against a baseline measured in this same run")
    print(Report.header)
    if options.runs(.insert) || options.runs(.fetch) || options.runs(.lookup) {
        try TableWorkloads(folder: folder, rows: options.rows, lookups: options.lookups).run(options: options, report: report)
    }
    if options.runs(.open) || options.runs(.pool) || options.runs(.openRaw) {
        try OpenWorkloads(folder: folder, runs: options.openRuns, poolReaders: options.poolReaders).run(options: options, report: report)
    }
    if options.runs(.rotation), options.rotationMB > 0 {
        for generation in options.rotationFormats {
            for pageSize in options.rotationPageSizes {
                try RotationWorkload(folder: folder, megabytes: options.rotationMB, runs: options.rotationRuns, pageSize: pageSize,
                                     generation: generation).run(options: options, report: report)
            }
        }
    }
    if options.runs(.concurrency) {
        try ConcurrencyWorkload(folder: folder, writers: options.writers, readers: options.readers, opsPerTask: options.opsPerTask,
                                runs: options.concurrencyRuns, poolReaders: options.poolReaders, writerOnExecutor: options.writerExecutor).run(report: report)
        // The read-heavy variant: 1 writer and 16 readers, with the pool.
        try ConcurrencyWorkload(folder: folder, writers: 1, readers: 16, opsPerTask: options.opsPerTask,
                                runs: options.concurrencyRuns, poolReaders: options.poolReaders, writerOnExecutor: options.writerExecutor).run(report: report, modes: [true], readHeavy: true)
    }
    if options.runs(.candidates) {
        try CandidateWorkload(folder: folder, runs: options.concurrencyRuns).run(report: report)
    }
    if options.runs(.memory) {
        try MemoryWorkload(folder: folder, rows: options.rows, runs: options.concurrencyRuns).run(report: report)
    }
    if options.runs(.telemetry) {
        try TelemetryWorkload(folder: folder, runs: options.openRuns).run(report: report)
    }
    if options.runs(.backgroundRotation), !options.backgroundMB.isEmpty || options.backgroundSustainedMB > 0 {
        try BackgroundRotationWorkload(folder: folder, sizesMB: options.backgroundMB, runs: options.backgroundRuns,
                                       sustainedMB: options.backgroundSustainedMB, limitSeconds: options.backgroundLimit,
                                       poolReaders: 4, unflushed: options.backgroundUnflushed).run(report: report)
    }
    report.printTable(title: "Summary (machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, possibly shared; ratios are same-run)")
    try report.writeJSON(to: options.jsonPath, settings: [
        "engine": "SQLCipher \(engine), SQLite \(sqlite)",
        "cores": "\(ProcessInfo.processInfo.activeProcessorCount)",
        "runs": "\(options.runs)", "openRuns": "\(options.openRuns)", "rows": "\(options.rows)", "lookups": "\(options.lookups)",
        "rotationMB": "\(options.rotationMB)", "rotationRuns": "\(options.rotationRuns)",
        "rotationPageSizes": options.rotationPageSizes.map(String.init).joined(separator: ","),
        "rotationFormats": options.rotationFormats.map(\.name).joined(separator: ","),
        "writers": "\(options.writers)", "readers": "\(options.readers)", "opsPerTask": "\(options.opsPerTask)",
        "concurrencyRuns": "\(options.concurrencyRuns)", "poolReaders": "\(options.poolReaders)",
        "backgroundMB": options.backgroundMB.map(String.init).joined(separator: ","), "backgroundRuns": "\(options.backgroundRuns)",
        "backgroundSustainedMB": "\(options.backgroundSustainedMB)", "backgroundLimit": "\(options.backgroundLimit)",
    ])
    print("results: \(options.jsonPath)")
} catch {
    FileHandle.standardError.write(Data("benchmark failed: \(error)\n".utf8))
    exit(1)
}
