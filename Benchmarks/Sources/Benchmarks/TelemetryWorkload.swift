import EncryptedSQLite
import Foundation

/// Workload 8: what the Telemetry seam costs when the app bootstraps no metrics or tracing
/// backend (the packages' no-op handlers), against what it instruments.
///
/// The library side runs, `iterations` times, exactly the seam calls one open that rotates makes
/// (an `open` span with a nested `rotate` span, `opened`, `rotated`, one `kdfRun`); the figure is
/// the time per such open. The baseline is the open it instruments: a 1-key open of a
/// current-key file (workload 4a's library side). The ratio is the overhead's share of an open.
struct TelemetryWorkload {
    let folder: String
    let runs: Int
    let iterations = 20_000

    func run(report: Report) throws {
        let open = OpenWorkloads(folder: folder, runs: runs, poolReaders: 1)
        try open.makeFiles()
        let samples = try paired(runs: runs,
                                 baseline: { try open.openSeconds(open.currentFile, open.keys(open.currentFile, count: 1)) },
                                 library: { timedRegion { seamCallsOfOneOpen(times: iterations) } / Double(iterations) })
        report.add(.timed(workload: "8 telemetry, no backend, per open", baseline: "EncryptedDatabase open, 1 passphrase",
                          library: "the seam calls of one rotating open", samples: samples, target: .ratioAtMost(0.01)))
    }

    private func seamCallsOfOneOpen(times: Int) {
        for index in 0..<times {
            Telemetry.span("open", ["db.path": folder, "current_key": "k1"]) {
                Telemetry.kdfRun()
                Telemetry.span("rotate", ["db.path": folder, "from_key": "k0", "to_key": "k1", "strategy": "automatic"]) {
                    Telemetry.rotated(method: "pageReencryption", fromKey: "k0", toKey: "k1", bytes: Int64(index), duration: .milliseconds(1))
                }
                Telemetry.opened(outcome: "rotated", keysTried: 2, duration: .milliseconds(2))
            }
        }
    }
}
