import Foundation
import TestSupport

/// Runs the built `rekey` executable (found beside the test bundle, or at `$REKEY_BINARY`).
enum RekeyCLI {
    static let path = BuiltProduct.path("rekey")

    /// Runs `rekey` in `directory` with `arguments` and exactly `environment` (plus PATH).
    static func run(_ arguments: [String], in directory: TemporaryDirectory, environment: [String: String] = [:]) throws -> ProcessResult {
        var env = environment
        env["PATH"] = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return try ProcessRunner.run(path, arguments, environment: env, currentDirectory: directory.path)
    }

    /// Runs `rekey` through `/bin/sh -c` with a shell prefix (e.g. `ulimit -f 64;` or `setpriv …`).
    static func runWrapped(_ prefix: String, _ arguments: [String], in directory: TemporaryDirectory, environment: [String: String] = [:]) throws -> ProcessResult {
        var env = environment
        env["PATH"] = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let quoted = ([path] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        return try ProcessRunner.run("/bin/sh", ["-c", "\(prefix) \(quoted)"], environment: env, currentDirectory: directory.path)
    }
}
