import Foundation

/// Seconds on the monotonic clock for `body`. Every timed region of the benchmark goes through
/// this one function, so that callgrind can count the instructions of exactly what is timed:
/// `--zero-before='*timedRegion*' --dump-after='*timedRegion*'` (see `--profile` and
/// Benchmarks/README.md).
@inline(never)
func timedRegion(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try body()
    return (ContinuousClock.now - start).seconds
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

func median(_ samples: [Double]) -> Double {
    let sorted = samples.sorted()
    guard !sorted.isEmpty else { return .nan }
    let middle = sorted.count / 2
    return sorted.count.isMultiple(of: 2) ? (sorted[middle - 1] + sorted[middle]) / 2 : sorted[middle]
}

/// Runs the baseline and the library variant `runs` times each, alternating which goes first, so
/// that a slow phase of the shared machine hits both. Each closure returns the seconds it measured
/// (so that per-run setup stays outside the timing).
func paired(runs: Int, baseline: () throws -> Double, library: () throws -> Double) rethrows -> (baseline: [Double], library: [Double]) {
    var base: [Double] = []
    var lib: [Double] = []
    for run in 0..<runs {
        if run.isMultiple(of: 2) {
            base.append(try baseline())
            lib.append(try library())
        } else {
            lib.append(try library())
            base.append(try baseline())
        }
    }
    return (base, lib)
}

/// A target on a result: on the ratio (library cost / baseline cost) or on the library's value.
enum Target {
    /// The ratio must be at most this (times, sizes).
    case ratioAtMost(Double)
    /// The ratio must be at least this (throughputs).
    case ratioAtLeast(Double)
    /// The library's value must be at most this (in the row's unit).
    case valueAtMost(Double)

    func isMet(ratio: Double, value: Double) -> Bool {
        switch self {
        case .ratioAtMost(let limit): return ratio <= limit
        case .ratioAtLeast(let limit): return ratio >= limit
        case .valueAtMost(let limit): return value <= limit
        }
    }

    var text: String {
        switch self {
        case .ratioAtMost(let limit): return String(format: "≤ %.2fx", limit)
        case .ratioAtLeast(let limit): return String(format: "≥ %.2fx", limit)
        case .valueAtMost(let limit): return String(format: "≤ %g", limit)
        }
    }
}

/// One line of the table: a baseline and the library on the same workload, in the same run.
struct ResultRow: Codable {
    /// Workload number and short name, e.g. `1 insert`.
    let workload: String
    /// What the baseline is (`raw C`, or another library variant).
    let baseline: String
    /// What the library ran.
    let library: String
    /// The unit of the two medians: `ms`, `MB/s`, `ops/s`, `MB`.
    let unit: String
    let baselineMedian: Double
    let libraryMedian: Double
    /// Library median / baseline median, in the row's unit: for times and sizes above 1 means
    /// the library is slower or bigger; for throughputs (MB/s, ops/s) below 1 means it is slower.
    let ratio: Double
    /// The target on the ratio or value, e.g. `≤ 1.10x`; `nil` for rows shown for information.
    let target: String?
    let met: Bool?
    /// Every sample, in the unit above.
    let baselineSamples: [Double]
    let librarySamples: [Double]
    /// Extra facts (KDF runs, rotation method, peak RSS…).
    let notes: [String: String]

    init(workload: String, baseline: String, library: String, unit: String, baselineSamples: [Double], librarySamples: [Double],
         target: Target? = nil, notes: [String: String] = [:]) {
        self.workload = workload
        self.baseline = baseline
        self.library = library
        self.unit = unit
        self.baselineSamples = baselineSamples
        self.librarySamples = librarySamples
        baselineMedian = median(baselineSamples)
        libraryMedian = median(librarySamples)
        ratio = libraryMedian / baselineMedian
        self.target = target?.text
        met = target?.isMet(ratio: ratio, value: libraryMedian)
        self.notes = notes
    }

    /// Milliseconds from samples in seconds.
    static func timed(workload: String, baseline: String, library: String, samples: (baseline: [Double], library: [Double]),
                      target: Target? = nil, notes: [String: String] = [:]) -> ResultRow {
        ResultRow(workload: workload, baseline: baseline, library: library, unit: "ms",
                  baselineSamples: samples.baseline.map { $0 * 1000 }, librarySamples: samples.library.map { $0 * 1000 },
                  target: target, notes: notes)
    }
}

/// Collects the rows, prints each as it comes, and writes the table and the JSON file at the end.
final class Report {
    private(set) var rows: [ResultRow] = []
    private(set) var sections: [String: [String: String]] = [:]

    func add(_ row: ResultRow) {
        rows.append(row)
        print("  " + Self.line(row))
        fflush(nil)
    }

    /// Free-form facts for the JSON file (e.g. per-method rotation figures).
    func note(_ section: String, _ values: [String: String]) {
        sections[section, default: [:]].merge(values) { $1 }
    }

    static let header = [
        pad("workload", 30), pad("baseline", 32), pad("EncryptedSQLite", 37), pad("baseline", 11, right: true),
        pad("library", 11, right: true), pad("ratio", 7, right: true), pad("target", 9, right: true), " met",
    ].joined(separator: " ")

    static func line(_ row: ResultRow) -> String {
        let met = row.met.map { $0 ? " yes" : " NO" } ?? "   -"
        return [
            pad(row.workload, 30), pad(row.baseline, 32), pad(row.library, 37),
            pad(format(row.baselineMedian, row.unit), 11, right: true), pad(format(row.libraryMedian, row.unit), 11, right: true),
            pad(row.ratio.isFinite ? String(format: "%.2fx", row.ratio) : "-", 7, right: true), pad(row.target ?? "", 9, right: true), met,
        ].joined(separator: " ")
    }

    func printTable(title: String) {
        print("\n" + title)
        print(Self.header)
        print(String(repeating: "-", count: Self.header.count))
        for row in rows { print(Self.line(row)) }
        let judged = rows.compactMap(\.met)
        print("\(judged.filter { $0 }.count) of \(judged.count) targets met. Ratio = EncryptedSQLite / baseline, in the row's unit (ms, MB: lower is better; MB/s, ops/s: higher is better).")
    }

    func writeJSON(to path: String, settings: [String: String]) throws {
        struct File: Encodable {
            let generatedAt: String
            let settings: [String: String]
            let results: [ResultRow]
            let details: [String: [String: String]]
        }
        let file = File(generatedAt: ISO8601DateFormatter().string(from: Date()), settings: settings, results: rows, details: sections)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        // A ratio of counts that are both 0 (failed operations, lost writes) is not a number.
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        let folder = (path as NSString).deletingLastPathComponent
        if !folder.isEmpty { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        try encoder.encode(file).write(to: URL(fileURLWithPath: path))
    }

    private static func format(_ value: Double, _ unit: String) -> String {
        switch unit {
        case "ms": return value >= 100 ? String(format: "%.0f ms", value) : String(format: "%.2f ms", value)
        case "ops/s": return String(format: "%.0f ops/s", value)
        case "n": return String(format: "%.0f", value)
        case "s/GB": return String(format: "%.2f s/GB", value)
        default: return String(format: "%.1f %@", value, unit)
        }
    }

    private static func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
        let count = text.count
        guard count < width else { return text }
        let fill = String(repeating: " ", count: width - count)
        return right ? fill + text : text + fill
    }
}
