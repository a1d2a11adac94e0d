import EncryptedSQLite
import Foundation

/// Prints `status` outcomes as lines of text (states on stdout, failures on stderr, as each
/// database finishes) or as one JSON document on stdout at the end. States, paths and error
/// descriptions never hold key material.
struct StatusPrinter: Sendable {
    let json: Bool

    /// Prints one database's line (nothing with `--json`).
    func printLine(_ outcome: FleetInspectionOutcome) {
        guard !json else { return }
        switch outcome.result {
        case .success(let state): FileHandle.standardOutput.write(Data((Self.line(state) + "\n").utf8))
        case .failure(let failure): printError(failure.description)
        }
    }

    /// Prints the key ages that break their policy (stderr) and the health lines (nothing with `--json`).
    func printAges(_ ages: [KeyAge], healths: [Result<DatabaseHealth, EncryptedDatabaseError>]) {
        guard !json else { return }
        for age in ages where age.tooOld { printError(Self.keyAgeWarning(age)) }
        for health in healths {
            switch health {
            case .success(let health): FileHandle.standardOutput.write(Data((Self.line(health) + "\n").utf8))
            case .failure(let error): printError(error.description)
            }
        }
    }

    /// `app.sqlite: current key "k1" created 2024-01-10 is 410 days old, over its maximum of 365 days; …`
    static func keyAgeWarning(_ age: KeyAge) -> String {
        "\(age.path): current key \"\(age.keyID)\" created \(age.created ?? "?") is \(age.ageDays ?? 0) days old, over its maximum of \(age.maximumDays ?? 0) days; make a new key (rekey keys new) and rotate"
    }

    /// `app.sqlite: health: key "k2" (current), sqlcipher3 …, journal wal, 40960 bytes + wal 4120, pages ok (page HMACs)`
    static func line(_ health: DatabaseHealth) -> String {
        var parts = ["key \"\(health.keyID)\"" + (health.needsRotation ? " (needs rotation to \"\(health.currentKeyID)\")" : " (current)"), health.format,
                     "journal \(health.journalMode)", "\(health.bytes) bytes" + (health.walBytes > 0 ? " + wal \(health.walBytes)" : "")]
        parts.append("pages \(health.integrity.rawValue)" + (health.integrityDetail.map { ": \($0)" } ?? "") + " (\(health.integrityMethod))")
        if let age = health.currentKeyAgeDays { parts.append("key age \(age) days" + (health.maximumKeyAgeDays.map { " (max \($0))" } ?? "")) }
        return "\(health.path): health: " + parts.joined(separator: ", ")
    }

    /// Prints the whole report as one JSON document (only with `--json`).
    func printJSON(_ report: FleetInspectionReport, ages: [KeyAge], healths: [Result<DatabaseHealth, EncryptedDatabaseError>]) {
        guard json else { return }
        let healthErrors = healths.compactMap { result -> Document.ErrorInfo? in
            guard case .failure(let error) = result else { return nil }
            return Document.ErrorInfo(path: "", kind: error.category.rawValue, message: error.description)
        }
        let document = Document(
            databases: report.states,
            keyAges: ages,
            health: healths.compactMap { try? $0.get() },
            errors: report.failures.map { Document.ErrorInfo(path: $0.path, kind: $0.failure.kind, message: $0.failure.description) } + healthErrors)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        if let data = try? encoder.encode(document) {
            Swift.print(String(decoding: data, as: UTF8.self))
        }
    }

    /// `app.sqlite: key "k1", needs rotation to "k3" (page re-encryption), journal delete, …`
    static func line(_ state: DatabaseState) -> String {
        var parts: [String] = []
        if state.plaintext {
            parts.append("unencrypted (plaintext entry \"\(state.openedWithKeyID)\")")
        } else {
            parts.append("key \"\(state.openedWithKeyID)\"" + (state.legacy ? " (legacy)" : ""))
        }
        let method = (state.rotationMethod ?? .inPlace).name
        parts.append(state.needsRotation ? "needs rotation to \"\(state.currentKeyID)\" (\(method))" : "current")
        parts.append("journal \(state.journalMode)")
        parts.append("\(state.pageCount) pages of \(state.pageSize) bytes")
        if let kdf = state.kdfIterations { parts.append("kdf_iter \(kdf)") }
        if let hmac = state.useHMAC { parts.append("hmac \(hmac ? "on" : "off")") }
        parts.append("\(state.bytes) bytes")
        parts.append("user_version \(state.userVersion)")
        if !state.sideFiles.isEmpty { parts.append("side files \(state.sideFiles.joined(separator: " "))") }
        return "\(state.path): " + parts.joined(separator: ", ")
    }

    /// The `status --json` output.
    struct Document: Encodable {
        struct ErrorInfo: Encodable {
            let path: String
            let kind: String
            let message: String
        }

        let databases: [DatabaseState]
        let keyAges: [KeyAge]
        let health: [DatabaseHealth]
        let errors: [ErrorInfo]
    }
}
