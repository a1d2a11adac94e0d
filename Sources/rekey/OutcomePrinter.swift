import EncryptedSQLite
import Foundation

/// Prints outcomes as lines of text (results on stdout, failures on stderr) or as one JSON
/// document on stdout. Only ids, paths, timings and error descriptions are printed; those never
/// hold key material.
struct OutcomePrinter {
    let json: Bool

    func print(_ outcomes: [DatabaseOutcome]) {
        if json {
            let document = JSONDocument(databases: outcomes.map(JSONDocument.Database.init), exitCode: ExitStatus.overall(outcomes.map(\.status)).code)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            if let data = try? encoder.encode(document), let text = String(data: data, encoding: .utf8) {
                Swift.print(text)
            }
            return
        }
        for outcome in outcomes {
            switch outcome.result {
            case .failed(let failure):
                FileHandle.standardError.write(Data("rekey: \(failure.message)\n".utf8))
            default:
                Swift.print(line(for: outcome))
            }
        }
    }

    func line(for outcome: DatabaseOutcome) -> String {
        switch outcome.result {
        case .rotated(let report):
            let rotation = report.rotation!
            return "\(outcome.path): opened with key \"\(report.openedWithKeyID)\", rotated to \"\(rotation.toKeyID)\" in \(ms(rotation.totalDuration)) ms (rekey \(ms(rotation.rekeyDuration)) ms, verify \(rotation.verification.rawValue) \(ms(rotation.verifyDuration)) ms)"
        case .alreadyCurrent(let report):
            return "\(outcome.path): already on the current key \"\(report.currentKeyID)\" (\(report.attempts.count) key(s) tried, \(ms(report.totalDuration)) ms)"
        case .checked(let check):
            if check.needsRotation {
                return "\(outcome.path): on key \"\(check.openedWithKeyID)\"; needs rotation to \"\(check.currentKeyID)\""
            }
            return "\(outcome.path): on the current key \"\(check.currentKeyID)\""
        case .failed(let failure):
            return "\(outcome.path): \(failure.message)"
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
            switch outcome.result {
            case .rotated(let report), .alreadyCurrent(let report):
                status = report.rotated ? "rotated" : "current"
                openedWithKeyID = report.openedWithKeyID
                currentKeyID = report.currentKeyID
                keysTried = report.attempts.map(\.keyID)
                created = report.created
                durationMs = report.totalDuration.milliseconds
                rotation = report.rotation.map(Rotation.init)
                error = nil
            case .checked(let check):
                status = check.needsRotation ? "needs-rotation" : "current"
                openedWithKeyID = check.openedWithKeyID
                currentKeyID = check.currentKeyID
                keysTried = check.attempts.map(\.keyID)
                created = nil
                durationMs = nil
                rotation = nil
                error = nil
            case .failed(let failure):
                status = "failed"
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
        let rekeyMs: Double
        let verifyMs: Double
        let verification: String
        let totalMs: Double

        init(_ report: RotationReport) {
            fromKeyID = report.fromKeyID
            toKeyID = report.toKeyID
            journalMode = report.journalMode
            bytes = report.bytes
            rekeyMs = report.rekeyDuration.milliseconds
            verifyMs = report.verifyDuration.milliseconds
            verification = report.verification.rawValue
            totalMs = report.totalDuration.milliseconds
        }
    }

    struct ErrorInfo: Encodable {
        let kind: String
        let message: String

        init(_ failure: DatabaseOutcome.Failure) {
            switch failure {
            case .keys: kind = "keys"
            case .database(let error): kind = error.category.rawValue
            }
            message = failure.message
        }
    }

    let databases: [Database]
    let exitCode: Int32
}
