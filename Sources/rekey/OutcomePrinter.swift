import EncryptedSQLite
import Foundation

/// Prints outcomes as lines of text (results on stdout, failures on stderr) or as one JSON
/// document on stdout. Only ids, paths, timings and error descriptions are printed; those never
/// hold key material.
struct OutcomePrinter {
    let json: Bool

    /// Prints one database's line: results on stdout, failures on stderr.
    func printLine(_ outcome: DatabaseOutcome) {
        switch outcome.result {
        case .failed(let failure):
            printError(failure.description)
        default:
            FileHandle.standardOutput.write(Data((line(for: outcome) + "\n").utf8))
        }
    }

    func printJSON(_ outcomes: [DatabaseOutcome], report: FleetReport) {
        let document = JSONDocument(
            databases: outcomes.map(JSONDocument.Database.init), summary: JSONDocument.Summary(report),
            exitCode: ExitStatus.overall(outcomes.map(\.status)).code)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        if let data = try? encoder.encode(document), let text = String(data: data, encoding: .utf8) {
            Swift.print(text)
        }
    }

    /// `200 databases in 8.1 s (24.7/s, 2 jobs): 180 rotated, 15 already current, 5 failed` and the failures.
    func printSummary(_ report: FleetReport) {
        let seconds = report.duration.milliseconds / 1000
        var parts = ["\(report.rotated) rotated", "\(report.alreadyCurrent) already current"]
        if report.needingRotation > 0 { parts.append("\(report.needingRotation) need rotation") }
        parts.append("\(report.failures.count) failed")
        let rate = seconds > 0 ? Double(report.outcomes.count) / seconds : 0
        Swift.print("Summary: \(report.outcomes.count) databases in \(String(format: "%.1f", seconds)) s (\(String(format: "%.1f", rate))/s, \(report.jobs) jobs): \(parts.joined(separator: ", "))")
        for (path, failure) in report.failures {
            Swift.print("  failed: \(path): \(failure.reason)")
        }
    }

    func line(for outcome: DatabaseOutcome) -> String {
        switch outcome.result {
        case .rotated(let report):
            let rotation = report.rotation!
            let how = rotation.method == .export ? "rewritten for" : "rotated to"
            return "\(outcome.path): opened with key \"\(report.openedWithKeyID)\", \(how) \"\(rotation.toKeyID)\" in \(ms(rotation.totalDuration)) ms (\(rotation.method.name) \(ms(rotation.rekeyDuration)) ms, verify \(rotation.verification.rawValue) \(ms(rotation.verifyDuration)) ms)"
        case .alreadyCurrent(let report):
            return "\(outcome.path): already on the current key \"\(report.currentKeyID)\" (\(report.attempts.count) key(s) tried, \(ms(report.totalDuration)) ms)"
        case .checked(let check):
            if check.needsRotation {
                return "\(outcome.path): on key \"\(check.openedWithKeyID)\"; needs rotation to \"\(check.currentKeyID)\""
            }
            return "\(outcome.path): on the current key \"\(check.currentKeyID)\""
        case .failed(let failure):
            return "\(outcome.path): \(failure.description)"
        }
    }
}

private func ms(_ duration: Duration) -> Int { Int(duration.milliseconds.rounded()) }

/// The `--json` output.
struct JSONDocument: Encodable {
    struct Database: Encodable {
        let path: String
        let status: String
        let openedWithKeyID: String?
        let currentKeyID: String?
        let keysTried: [String]?
        let created: Bool?
        let durationMs: Double?
        let rotation: Rotation?
        let error: ErrorInfo?
        let exitCode: Int32

        init(_ outcome: DatabaseOutcome) {
            path = outcome.path
            exitCode = outcome.status.code
            status = outcome.result.label
            switch outcome.result {
            case .rotated(let report), .alreadyCurrent(let report):
                openedWithKeyID = report.openedWithKeyID
                currentKeyID = report.currentKeyID
                keysTried = report.attempts.map(\.keyID)
                created = report.created
                durationMs = report.totalDuration.milliseconds
                rotation = report.rotation.map(Rotation.init)
                error = nil
            case .checked(let check):
                openedWithKeyID = check.openedWithKeyID
                currentKeyID = check.currentKeyID
                keysTried = check.attempts.map(\.keyID)
                created = nil
                durationMs = nil
                rotation = nil
                error = nil
            case .failed(let failure):
                openedWithKeyID = nil
                currentKeyID = nil
                keysTried = nil
                created = nil
                durationMs = nil
                rotation = nil
                error = ErrorInfo(failure)
            }
        }
    }

    struct Rotation: Encodable {
        let fromKeyID: String
        let toKeyID: String
        let journalMode: String
        let bytes: Int64
        let method: String
        let rekeyMs: Double
        let verifyMs: Double
        let verification: String
        let totalMs: Double

        init(_ report: RotationReport) {
            fromKeyID = report.fromKeyID
            toKeyID = report.toKeyID
            journalMode = report.journalMode
            bytes = report.bytes
            method = report.method.rawValue
            rekeyMs = report.rekeyDuration.milliseconds
            verifyMs = report.verifyDuration.milliseconds
            verification = report.verification.rawValue
            totalMs = report.totalDuration.milliseconds
        }
    }

    struct ErrorInfo: Encodable {
        let kind: String
        let message: String

        init(_ failure: FleetFailure) {
            kind = failure.kind
            message = failure.description
        }
    }

    struct Summary: Encodable {
        let total: Int
        let rotated: Int
        let alreadyCurrent: Int
        let needRotation: Int
        let failed: Int
        let jobs: Int
        let durationMs: Double

        init(_ report: FleetReport) {
            total = report.outcomes.count
            rotated = report.rotated
            alreadyCurrent = report.alreadyCurrent
            needRotation = report.needingRotation
            failed = report.failures.count
            jobs = report.jobs
            durationMs = report.duration.milliseconds
        }
    }

    let databases: [Database]
    let summary: Summary
    let exitCode: Int32
}
