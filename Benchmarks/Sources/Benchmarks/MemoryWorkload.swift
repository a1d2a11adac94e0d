import EncryptedSQLite
import Foundation

/// Peak RSS (`VmHWM`) of workload 7 and of the 200,000-row fetch, raw C against the library, each
/// run in a child process of its own (this binary re-executed with the hidden subcommand
/// `__memory-child`; the key in its environment), alternating which side goes first. Both sides
/// run the same binary, so the runtime and libraries each pages in count on both sides.
struct MemoryWorkload {
    let folder: String
    let rows: Int
    let runs: Int
    static let keyVariable = "ENCRYPTEDSQLITE_BENCH_MEMORY_KEY"

    /// The pairs measured: workload, raw C child variant, library child variant.
    static let pairs = [
        ("7 8w+8r DELETE, peak RSS", "concurrency-raw-delete", "concurrency-lib-delete"),
        ("7 8w+8r WAL, peak RSS", "concurrency-raw-wal", "concurrency-lib-wal"),
        ("2 fetch by index, peak RSS", "fetch-raw", "fetch-index"),
        ("2 fetch Decodable, peak RSS", "fetch-raw", "fetch-decodable"),
    ]

    func run(report: Report) throws {
        let tables = TableWorkloads(folder: folder, rows: rows, lookups: 1)
        let path = folder + "/memory-rows.sqlite"
        try tables.makeReadFile(path: path)
        for (workload, rawVariant, libraryVariant) in Self.pairs {
            let samples = try paired(runs: runs,
                                     baseline: { try child(rawVariant, path: path, key: tables.hexKey) },
                                     library: { try child(libraryVariant, path: path, key: tables.hexKey) })
            report.add(ResultRow(workload: workload, baseline: "raw C (\(rawVariant))", library: libraryVariant, unit: "MB",
                                 baselineSamples: samples.baseline, librarySamples: samples.library, target: .ratioAtMost(1.2),
                                 notes: ["meaning": "peak RSS (VmHWM) of a child process that runs one side once"]))
        }
    }

    /// Runs one variant in a child process; its peak RSS in MB.
    func child(_ variant: String, path: String, key: String) throws -> Double {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try selfExecutable())
        process.arguments = ["__memory-child", variant, path, "\(rows)"]
        var environment = ProcessInfo.processInfo.environment
        environment[Self.keyVariable] = key
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0, let text = String(data: data, encoding: .utf8),
              let kilobytes = Double(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw BenchmarkError("memory child \(variant) exited with \(process.terminationStatus)")
        }
        return kilobytes / 1024
    }

    /// In the child: runs `variant` once on the file at `path`, prints the peak RSS in kB.
    static func child(arguments: [String]) throws {
        guard arguments.count == 3, let rows = Int(arguments[2]), let key = ProcessInfo.processInfo.environment[keyVariable] else {
            throw BenchmarkError("usage: __memory-child VARIANT PATH ROWS, key in \(keyVariable)")
        }
        let (variant, path) = (arguments[0], arguments[1])
        let folder = (path as NSString).deletingLastPathComponent + "/memory-child-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let tables = TableWorkloads(folder: folder, rows: rows, lookups: 1, hexKey: key)
        let concurrency = ConcurrencyWorkload(folder: folder, writers: 8, readers: 8, opsPerTask: 200, runs: 1, poolReaders: 4)
        switch variant {
        case "concurrency-raw-delete": _ = try concurrency.rawOpsPerSecond(wal: false)
        case "concurrency-lib-delete": _ = try concurrency.libraryOpsPerSecond(pool: false, onExecutor: false)
        case "concurrency-raw-wal": _ = try concurrency.rawOpsPerSecond(wal: true)
        case "concurrency-lib-wal": _ = try concurrency.libraryOpsPerSecond(pool: true, onExecutor: false)
        case "fetch-raw":
            let items = try tables.rawFetchAll(try RawConnection(path: path, key: tables.rawKey))
            guard items.count == rows else { throw BenchmarkError("raw fetch read \(items.count) rows") }
        case "fetch-index", "fetch-decodable":
            let database = try EncryptedDatabase(path: path, keys: tables.keyList(path))
            let items = variant == "fetch-index" ? try tables.libraryFetchByIndex(database) : try tables.libraryFetchDecodable(database)
            guard items.count == rows else { throw BenchmarkError("library fetch read \(items.count) rows") }
        default: throw BenchmarkError("unknown memory variant \(variant)")
        }
        print(memoryStatus().peakKB)
    }
}
