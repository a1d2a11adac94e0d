import EncryptedSQLite
import Foundation

/// The benchmark's settings, from the command line. Every count can be lowered for a quick run.
struct Options {
    /// Timed repetitions per workload (median reported) for workloads 1–3.
    var runs = 31
    /// Timed repetitions for the open-cost workloads (4, 5).
    var openRuns = 41
    /// Rows inserted and fetched (workloads 1, 2).
    var rows = 200_000
    /// Primary-key lookups in one read transaction (workload 3).
    var lookups = 50_000
    /// Size of the rotation database in MB (workload 6); 0 skips the workload.
    var rotationMB = 256
    /// Repetitions per rotation method (each in its own child process).
    var rotationRuns = 3
    /// Page sizes of the rotation databases (workload 6): one file per page size and format.
    var rotationPageSizes = [1024, 4096]
    /// Formats of the rotation databases (workload 6): SQLCipher 3's, and SQLCipher 4's where the
    /// linked engine reads it.
    var rotationFormats: [CipherGeneration] = SQLCipherEngine.linked.major >= 4 ? [.sqlcipher3, .sqlcipher4] : [.sqlcipher3]
    /// Writer and reader tasks (workload 7).
    var writers = 8
    var readers = 8
    /// Whether workload 7's writer tasks run on the database's `writerExecutor`.
    var writerExecutor = false
    /// Operations per task (workload 7).
    var opsPerTask = 200
    /// Repetitions of workload 7.
    var concurrencyRuns = 3
    /// Size of the reader pool (workloads 5 and 7).
    var poolReaders = 4
    /// Sizes in MB of the files of the background-rotation workload (issue 23); empty skips its
    /// foreground/background matrix.
    var backgroundMB = [256]
    /// Runs of each foreground/background case (medians reported).
    var backgroundRuns = 1
    /// Whether the background-rotation cases start with their file's copy still being written out.
    var backgroundUnflushed = false
    /// Size in MB of the sustained-write variant's file; 0 skips it.
    var backgroundSustainedMB = 256
    /// Seconds after which the sustained variant's copy is cancelled if it has not finished.
    var backgroundLimit = 120
    /// Workloads to run (all when empty).
    var only: Set<Workload> = []
    /// Where the JSON results go.
    var jsonPath = ".build/benchmarks/results.json"
    /// Runs one variant once, for `valgrind --tool=callgrind` (see Benchmarks/README.md).
    var profile: String?

    func runs(_ workload: Workload) -> Bool { only.isEmpty || only.contains(workload) }

    static let usage = """
        usage: encryptedsqlite-benchmarks [options]
          --runs N              repetitions of workloads 1-3 (median reported; default 31)
          --open-runs N         repetitions of workloads 4-5 (default 41)
          --rows N              rows inserted and fetched (default 200000)
          --lookups N           primary-key lookups (default 50000)
          --rotation-mb N       size of the rotation database in MB, 0 skips workload 6 (default 256)
          --rotation-runs N     child-process runs per rotation method (default 3)
          --rotation-page-size LIST  comma-separated page sizes of the rotation databases (default 1024,4096)
          --rotation-format LIST     comma-separated formats of the rotation databases: sqlcipher3, sqlcipher4
                                (default: sqlcipher3, and sqlcipher4 on SQLCipher 4)
          --writers N           writer tasks in workload 7 (default 8)
          --readers N           reader tasks in workload 7 (default 8)
          --writer-executor     workload 7's writer tasks run on the database's writerExecutor
                                (the read-heavy row always shows both)
          --ops-per-task N      operations per task in workload 7 (default 200)
          --concurrency-runs N  repetitions of workload 7 (default 3)
          --pool-readers N      reader pool size in workloads 5 and 7 (default 4)
          --background-mb LIST  comma-separated file sizes in MB of the background-rotation workload, 0 skips
                                its foreground/background matrix (default 256; e.g. 256,2048)
          --background-runs N   runs of each background-rotation case (median reported; default 1)
          --background-unflushed  no sync after each case's copy of the file: the rotation starts
                                while the page cache is still being written out
          --background-sustained-mb N  file size of the sustained-write variant, 0 skips it (default 256)
          --background-limit S  seconds after which the sustained variant's copy is cancelled (default 120)
          --only LIST           comma-separated: \(Workload.allCases.map(\.rawValue).joined(separator: ","))
          --json PATH           results file (default .build/benchmarks/results.json)
          --profile VARIANT     run one variant once, for callgrind: \(ProfileVariant.names.joined(separator: ", "))
        """

    static func parse(_ arguments: [String]) throws -> Options {
        var options = Options()
        var index = 0
        func value(_ name: String) throws -> String {
            index += 1
            guard index < arguments.count else { throw UsageError("\(name) needs a value") }
            return arguments[index]
        }
        func number(_ name: String, minimum: Int = 1) throws -> Int {
            let text = try value(name)
            guard let number = Int(text), number >= minimum else { throw UsageError("\(name) needs a whole number ≥ \(minimum), not \(text)") }
            return number
        }
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "--runs": options.runs = try number(argument)
            case "--open-runs": options.openRuns = try number(argument)
            case "--rows": options.rows = try number(argument, minimum: 10)
            case "--lookups": options.lookups = try number(argument)
            case "--rotation-mb": options.rotationMB = try number(argument, minimum: 0)
            case "--rotation-runs": options.rotationRuns = try number(argument)
            case "--rotation-page-size":
                options.rotationPageSizes = try value(argument).split(separator: ",").map { text in
                    guard let size = Int(text), size >= 512, size <= 65536, size & (size - 1) == 0 else {
                        throw UsageError("--rotation-page-size needs powers of two from 512 to 65536, not \(text)")
                    }
                    return size
                }
            case "--rotation-format":
                options.rotationFormats = try value(argument).split(separator: ",").map { name in
                    guard let generation = CipherGeneration(name: String(name)), generation.rawValue >= 3 else {
                        throw UsageError("--rotation-format takes sqlcipher3 or sqlcipher4, not \(name)")
                    }
                    guard generation.rawValue <= SQLCipherEngine.linked.major else {
                        throw UsageError("--rotation-format \(name): the linked SQLCipher \(SQLCipherEngine.linked.version) cannot read that format")
                    }
                    return generation
                }
            case "--writers": options.writers = try number(argument, minimum: 0)
            case "--readers": options.readers = try number(argument, minimum: 0)
            case "--writer-executor": options.writerExecutor = true
            case "--ops-per-task": options.opsPerTask = try number(argument)
            case "--concurrency-runs": options.concurrencyRuns = try number(argument)
            case "--pool-readers": options.poolReaders = try number(argument)
            case "--background-mb":
                let sizes = try value(argument).split(separator: ",").map { text in
                    guard let size = Int(text), size >= 0 else { throw UsageError("--background-mb needs sizes in MB, not \(text)") }
                    return size
                }
                options.backgroundMB = sizes.filter { $0 > 0 }
            case "--background-runs": options.backgroundRuns = try number(argument)
            case "--background-unflushed": options.backgroundUnflushed = true
            case "--background-sustained-mb": options.backgroundSustainedMB = try number(argument, minimum: 0)
            case "--background-limit": options.backgroundLimit = try number(argument)
            case "--json": options.jsonPath = try value(argument)
            case "--profile": options.profile = try value(argument)
            case "--only":
                for name in try value(argument).split(separator: ",") {
                    guard let workload = Workload(rawValue: String(name)) else { throw UsageError("unknown workload \(name)") }
                    options.only.insert(workload)
                }
            case "-h", "--help":
                print(usage)
                exit(0)
            default:
                throw UsageError("unknown option \(argument)")
            }
            index += 1
        }
        return options
    }
}

/// The workloads of issue 6, by the name `--only` takes.
enum Workload: String, CaseIterable {
    case insert, fetch, lookup, open, pool
    case openRaw = "open-raw"
    case rotation, concurrency, telemetry, candidates, memory
    case backgroundRotation = "background-rotation"
}

struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
