import Foundation

/// Runs the built `rekey` executable (found beside the test bundle, or at `$REKEY_BINARY`).
public enum RekeyCLI {
    /// The path of the `rekey` executable: the one place the test targets name it.
    public static let path = BuiltProduct.path("rekey")

    /// Runs `rekey` in `directory` with `arguments` and exactly `environment` (plus PATH); a run
    /// longer than `hangLimit` is stopped as hung.
    public static func run(_ arguments: [String], in directory: TemporaryDirectory, environment: [String: String] = [:],
                           hangLimit: Duration = HangGuard.defaultLimit) throws -> ProcessResult {
        try ProcessRunner.run(path, arguments, environment: ProcessRunner.withPATH(environment), currentDirectory: directory.path, hangLimit: hangLimit)
    }

    /// Runs `rekey` through `/bin/sh -c` with a shell prefix (e.g. `ulimit -f 64;` or `setpriv …`).
    public static func runWrapped(_ prefix: String, _ arguments: [String], in directory: TemporaryDirectory, environment: [String: String] = [:]) throws -> ProcessResult {
        let quoted = ([path] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        return try ProcessRunner.run("/bin/sh", ["-c", "\(prefix) \(quoted)"], environment: ProcessRunner.withPATH(environment), currentDirectory: directory.path)
    }
}

/// A session of `rekey` commands in one folder, written down as a user would see it (`$ rekey …`,
/// then what it printed), for a test to print at its end; each run must exit as expected and print
/// none of `secrets`, in any form ``SecretScan`` knows.
public final class RekeyTranscript {
    /// A run that exited otherwise than expected, or printed a secret.
    public struct UnexpectedRun: Error, CustomStringConvertible {
        /// What went wrong, with the command and what it printed.
        public let description: String
    }

    private let directory: TemporaryDirectory
    private let secrets: [String]
    /// The lines so far.
    public private(set) var lines: [String] = []

    /// A session in `directory` whose output must not contain `secrets`.
    public init(in directory: TemporaryDirectory, secrets: [String]) {
        self.directory = directory
        self.secrets = secrets
    }

    /// Adds `line` (a step taken outside `rekey`, e.g. `$ (remove the k1 entries from Keys)`).
    public func note(_ line: String) {
        lines.append(line)
    }

    /// The whole session, one line per command and per printed line.
    public var text: String { lines.joined(separator: "\n") }

    /// Runs `rekey arguments` in the folder and records it.
    /// - Throws: ``UnexpectedRun`` when its status is not `status` or it printed a secret.
    @discardableResult
    public func rekey(_ arguments: [String], expect status: Int32) throws -> ProcessResult {
        let result = try RekeyCLI.run(arguments, in: directory)
        let printed = result.stdout + result.stderr
        lines.append("$ rekey " + arguments.map { $0.contains("*") ? "'\($0)'" : $0 }.joined(separator: " ") + "   # exit \(result.status)")
        lines.append(contentsOf: printed.split(separator: "\n").map { "  " + $0 })
        guard result.status == status else {
            throw UnexpectedRun(description: "rekey \(arguments) exited \(result.status), expected \(status): \(result.stdout) \(result.stderr)")
        }
        let lowercased = printed.lowercased()
        for secret in secrets where SecretScan.forms(of: secret).contains(where: { lowercased.contains($0.lowercased()) }) {
            throw UnexpectedRun(description: "rekey \(arguments) printed a secret")
        }
        return result
    }
}
