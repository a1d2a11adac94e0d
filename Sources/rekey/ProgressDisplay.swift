import EncryptedSQLite
import Foundation

/// Shows a fleet run as it goes. On a terminal (standard error is a TTY): a progress bar on
/// standard error — files done, bytes, rate, time left, failures — redrawn after each database,
/// with each database's line printed above it. Otherwise: each database's line as it finishes.
/// Called by the fleet one database at a time.
final class ProgressDisplay: @unchecked Sendable {
    private let enabled: Bool
    private let printLines: Bool
    private let printer: OutcomePrinter
    private var drawn = false

    init(enabled: Bool, printLines: Bool, printer: OutcomePrinter) {
        self.enabled = enabled
        self.printLines = printLines
        self.printer = printer
    }

    func update(_ progress: FleetProgress, finished outcome: DatabaseOutcome) {
        if enabled && drawn { clear() }
        if printLines { printer.printLine(outcome) }
        if enabled {
            write(Self.bar(progress))
            drawn = true
        }
    }

    /// Removes the bar at the end of the run.
    func finish() {
        if enabled && drawn { clear() }
        drawn = false
    }

    private func clear() { write("\r\u{1B}[2K") }

    private func write(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }

    /// `[########------------]  80/200 files  1.2 MB  41.0 files/s  0.6 MB/s  ETA 0:03  2 failed`
    static func bar(_ progress: FleetProgress) -> String {
        let width = 24
        let fraction = progress.total > 0 ? Double(progress.done) / Double(progress.total) : 1
        let filled = Int((fraction * Double(width)).rounded(.down))
        let seconds = progress.elapsed.milliseconds / 1000
        let megabytes = Double(progress.bytesDone) / 1_000_000
        let bytesRate = seconds > 0 ? megabytes / seconds : 0
        var text = "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "] "
        text += "\(progress.done)/\(progress.total) files  " + String(format: "%.1f MB  %.1f files/s  %.1f MB/s", megabytes, progress.filesPerSecond, bytesRate)
        if let remaining = progress.estimatedRemaining {
            let total = Int(remaining.milliseconds / 1000)
            text += String(format: "  ETA %d:%02d", total / 60, total % 60)
        }
        if progress.failed > 0 { text += "  \(progress.failed) failed" }
        return text
    }
}
