import Foundation

/// What ``BackgroundRotationWorkload`` prints for each case and adds to the report.
extension BackgroundRotationWorkload {
    // MARK: Reporting

    private func caseName(_ megabytes: Int, _ mode: Mode) -> String {
        "23 \(mode.rawValue) \(megabytes) MB"
    }

    func printCase(_ outcome: Outcome, run: Int) {
        var name = (outcome.sustained ? "sustained " : "") + "\(outcome.mode.rawValue) \(outcome.method.rawValue)"
        name += String(repeating: " ", count: max(0, 24 - name.count))
        var line = String(format: "    run %d %@ %6.0f MB  longest %7.1f ms (%@ at %+.0f ms)  p99 %6.1f  p50 %5.2f ms  rotation %6.2f s  extra %6.1f MB  failed %d  lost %d of %d",
                          run + 1, name as NSString, Double(outcome.bytes) / 1e6, outcome.longestMS, outcome.longestKind as NSString, outcome.longestAtMS,
                          outcome.p99MS, outcome.p50MS, outcome.rotationSeconds, Double(outcome.extraBytes) / 1e6, outcome.failed,
                          outcome.lost, outcome.acknowledged)
        line += String(format: "  writes/s %.0f → %.0f", outcome.writesPerSecondBefore, outcome.writesPerSecondDuring)
        if let method = outcome.reportMethod { line += "  method \(method)" }
        if let reason = outcome.fallbackReason { line += "  fallback: \(reason)" }
        if let steps = outcome.steps, let step = outcome.longestStepMS, let swap = outcome.swapPauseMS {
            line += String(format: "  steps %d, longest step %.1f ms, swap %.1f ms", steps, step, swap)
        }
        if let phases = outcome.swapPhases { line += " [\(phases)]" }
        if let progress = outcome.progress { line += "  NOT FINISHED: \(progress)" }
        if let failure = outcome.firstFailure { line += "  first failure: \(failure)" }
        print(line)
        fflush(nil)
    }

    func addRows(_ outcomes: [Method: [Outcome]], megabytes: Int, mode: Mode, report: Report) {
        let name = caseName(megabytes, mode)
        let fg = outcomes[.foreground] ?? []
        let bg = outcomes[.background] ?? []
        let baseline = "foreground rotateToCurrentKey()"
        let library = "background rotation"
        func row(_ what: String, _ unit: String, _ value: (Outcome) -> Double, target: Target? = nil, notes: [String: String] = [:]) {
            report.add(ResultRow(workload: "\(name) \(what)", baseline: baseline, library: library, unit: unit,
                                 baselineSamples: fg.map(value), librarySamples: bg.map(value), target: target, notes: notes))
        }
        let bytes = Double(bg.first?.bytes ?? fg.first?.bytes ?? 0)
        row("pause", "ms", \.longestMS, target: .valueAtMost(100),
            notes: ["target": "background longest operation ≤ 100 ms (issue 23)",
                    "longestBackground": bg.map { String(format: "%.1f ms %@ at %+.0f ms", $0.longestMS, $0.longestKind, $0.longestAtMS) }.joined(separator: "; "),
                    "swapPhases": bg.compactMap(\.swapPhases).joined(separator: "; ")])
        row("p99", "ms", \.p99MS, notes: ["p99BeforeRotation": String(format: "foreground %.2f ms, background %.2f ms", median(fg.map(\.p99BeforeMS)), median(bg.map(\.p99BeforeMS)))])
        row("p50", "ms", \.p50MS)
        row("time", "ms", { $0.rotationSeconds * 1000 },
            notes: ["foregroundMethod": fg.first?.reportMethod ?? "?", "backgroundMethod": bg.first?.reportMethod ?? "?"])
        row("extra disk", "MB", { Double($0.extraBytes) / 1e6 },
            notes: ["measured": "peak total size of the files beside the database while the rotation ran, sampled every 5 ms",
                    "temporaryBytes": bg.compactMap(\.temporaryBytes).map(String.init).joined(separator: ",")])
        row("failed", "n", { Double($0.failed) }, target: .valueAtMost(0))
        row("lost", "n", { Double($0.lost) }, target: .valueAtMost(0),
            notes: ["acknowledged": "foreground \(fg.map(\.acknowledged)), background \(bg.map(\.acknowledged))"])
        row("s/GB", "s/GB", { $0.rotationSeconds / (bytes / 1e9) })
        for (method, list) in [(Method.foreground, fg), (.background, bg)] {
            report.note("background-rotation.\(megabytes).\(mode.rawValue).\(method.rawValue)", summary(list))
        }
        let missing = (fg + bg).filter { !$0.newKeyOnly }
        if !missing.isEmpty { print("    WARNING: \(missing.count) case(s) did not end on the new key only") }
    }

    func addSustainedRows(_ outcome: Outcome, megabytes: Int, quiet: [Outcome], report: Report) {
        let name = "23 busy \(outcome.mode.rawValue) \(megabytes) MB"
        let notes = ["finished": outcome.finished ? "yes" : "no", "progress": outcome.progress ?? "",
                     "fileMBAfter": String(format: "%.1f", Double(outcome.fileBytesAfter) / 1e6),
                     "load": "\(Self.tasks) tasks, each writing 4,000-byte ledger rows as fast as it can, no reads"]
        report.add(ResultRow(workload: "\(name) writes/s", baseline: "service before the rotation", library: "during background rotation",
                             unit: "ops/s", baselineSamples: [outcome.writesPerSecondBefore], librarySamples: [outcome.writesPerSecondDuring], notes: notes))
        report.add(ResultRow(workload: "\(name) pause", baseline: "service before the rotation", library: "during background rotation",
                             unit: "ms", baselineSamples: [outcome.longestBeforeMS], librarySamples: [outcome.longestMS], notes: notes))
        report.add(ResultRow(workload: "\(name) time", baseline: "background, 2 ms service", library: outcome.finished ? "background, sustained writes" : "background, NOT FINISHED",
                             unit: "ms", baselineSamples: quiet.map { $0.rotationSeconds * 1000 }, librarySamples: [outcome.rotationSeconds * 1000], notes: notes))
        report.add(ResultRow(workload: "\(name) fail/lost", baseline: "failed operations", library: "lost writes",
                             unit: "n", baselineSamples: [Double(outcome.failed)], librarySamples: [Double(outcome.lost)], target: .valueAtMost(0)))
        report.note("background-rotation.sustained.\(megabytes).\(outcome.mode.rawValue)", summary([outcome]))
    }

    /// The 10 GB figures from the largest size's measured rates.
    func summarizeRates(report: Report) {
        guard let largest = sizesMB.max() else { return }
        for mode in Mode.allCases {
            guard let section = report.sections["background-rotation.\(largest).\(mode.rawValue).foreground"],
                  let backgroundSection = report.sections["background-rotation.\(largest).\(mode.rawValue).background"],
                  let fg = section["medianSecondsPerGB"].flatMap(Double.init), let bg = backgroundSection["medianSecondsPerGB"].flatMap(Double.init) else { continue }
            let line = String(format: "10 GB from the %d MB rates (%@): foreground %.0f s holding the writer, background %.0f s of copying", largest, mode.rawValue, fg * 10, bg * 10)
            print("  " + line)
            report.note("background-rotation.tenGB.\(mode.rawValue)", ["foregroundSeconds": String(format: "%.1f", fg * 10), "backgroundSeconds": String(format: "%.1f", bg * 10),
                                                                        "from": "\(largest) MB, medians", "measured": "no (extrapolated from the per-GB rate)"])
        }
    }

    private func summary(_ list: [Outcome]) -> [String: String] {
        func med(_ value: (Outcome) -> Double, _ format: String = "%.2f") -> String { String(format: format, median(list.map(value))) }
        var values: [String: String] = [
            "bytes": "\(list.first?.bytes ?? 0)",
            "runs": "\(list.count)",
            "medianLongestMS": med(\.longestMS), "medianP99MS": med(\.p99MS), "medianP50MS": med(\.p50MS),
            "medianRotationSeconds": med(\.rotationSeconds, "%.3f"),
            "medianSecondsPerGB": med({ $0.rotationSeconds / (Double($0.bytes) / 1e9) }, "%.3f"),
            "medianExtraMB": med({ Double($0.extraBytes) / 1e6 }, "%.1f"),
            "failed": list.map { "\($0.failed)" }.joined(separator: ","),
            "lost": list.map { "\($0.lost)" }.joined(separator: ","),
            "acknowledged": list.map { "\($0.acknowledged)" }.joined(separator: ","),
            "newKeyOnly": list.allSatisfy(\.newKeyOnly) ? "yes" : "no",
            "finished": list.allSatisfy(\.finished) ? "yes" : "no",
        ]
        if let encoded = try? JSONEncoder().encode(list), let text = String(data: encoded, encoding: .utf8) { values["cases"] = text }
        return values
    }
}
