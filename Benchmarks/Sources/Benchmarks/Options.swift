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
    /// Page size of the rotation database (workload 6).
    var rotationPageSize = 1024
    /// Writer and reader tasks (workload 7).
    var writers = 8
    var readers = 8
    /// Operations per task (workload 7).
    var opsPerTask = 200
    /// Repetitions of workload 7.
    var concurrencyRuns = 3
    /// Size of the reader pool (workloads 5 and 7).
    var poolReaders = 4
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
          --rotation-page-size N  page size of the rotation database (default 1024)
          --writers N           writer tasks in workload 7 (default 8)
          --readers N           reader tasks in workload 7 (default 8)
          --ops-per-task N      operations per task in workload 7 (default 200)
          --concurrency-runs N  repetitions of workload 7 (default 3)
          --pool-readers N      reader pool size in workloads 5 and 7 (default 4)
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
            case "--rotation-page-size": options.rotationPageSize = try number(argument, minimum: 1024)
            case "--writers": options.writers = try number(argument, minimum: 0)
            case "--readers": options.readers = try number(argument, minimum: 0)
            case "--ops-per-task": options.opsPerTask = try number(argument)
            case "--concurrency-runs": options.concurrencyRuns = try number(argument)
            case "--pool-readers": options.poolReaders = try number(argument)
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
    case insert, fetch, lookup, open, pool, rotation, concurrency, telemetry
}

struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
