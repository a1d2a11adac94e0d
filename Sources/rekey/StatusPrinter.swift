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

    /// Prints the whole report as one JSON document (only with `--json`).
    func printJSON(_ report: FleetInspectionReport) {
        guard json else { return }
        let document = Document(
            databases: report.states,
            errors: report.failures.map { Document.ErrorInfo(path: $0.path, kind: $0.failure.kind, message: $0.failure.description) })
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
        let errors: [ErrorInfo]
    }
}
