import Foundation

/// One line of the results table: a measured value, its unit, and the goal it is held to (if any).
struct ResultRow: Encodable {
    let part: String
    let name: String
    let value: Double
    let unit: String
    /// The goal in words (`≤ 1 s`, `≥ 100×`), empty when the row is a plain measurement.
    var target = ""
    /// Whether the goal is met; `nil` without a goal or where it does not apply (the engine).
    var met: Bool?
    /// How the value was obtained when it is not measured directly (an estimate from a sample).
    var note = ""
}

/// The rows of one run, printed as a table and written as JSON.
final class ResultsTable {
    private(set) var rows: [ResultRow] = []

    func add(_ row: ResultRow) {
        rows.append(row)
        say(Self.line(row))
    }

    static let header = pad("part", 7) + pad("measurement", 68) + pad("value", 14) + pad("target", 22) + pad("met", 5) + "note\n" + String(repeating: "-", count: 130)

    static func line(_ row: ResultRow) -> String {
        let value = row.value >= 100 ? String(format: "%.0f", row.value) : row.value >= 1 ? String(format: "%.2f", row.value) : String(format: "%.4f", row.value)
        let met = row.met.map { $0 ? "yes" : "NO" } ?? "-"
        return pad(row.part, 7) + pad(row.name, 68) + pad("\(value) \(row.unit)", 14) + pad(row.target, 22) + pad(met, 5) + row.note
    }

    private static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }

    func writeJSON(to path: String, engine: String, settings: [String: String]) throws {
        struct File: Encodable {
            let generatedAt: String
            let engine: String
            let cores: Int
            let settings: [String: String]
            let rows: [ResultRow]
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let folder = (path as NSString).deletingLastPathComponent
        if !folder.isEmpty { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        let file = File(generatedAt: ISO8601DateFormatter().string(from: Date()), engine: engine,
                        cores: ProcessInfo.processInfo.activeProcessorCount, settings: settings, rows: rows)
        try encoder.encode(file).write(to: URL(fileURLWithPath: path))
    }
}

/// Seconds on the monotonic clock for `body`.
func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try body()
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

func median(_ samples: [Double]) -> Double {
    let sorted = samples.sorted()
    guard !sorted.isEmpty else { return .nan }
    let middle = sorted.count / 2
    return sorted.count.isMultiple(of: 2) ? (sorted[middle - 1] + sorted[middle]) / 2 : sorted[middle]
}

/// Writes a line to standard output at once (unbuffered), so that a long run written to a file
/// shows its progress.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
