import ArgumentParser
import Foundation
import Logging

/// What `notes-server serve …` or `notes-server seed …` was asked to do (see the README), from
/// the command line that ``NotesServer`` parses.
///
/// Keys never come from the environment or the command line: `--keys` names a Keys file, and
/// without it the server reads the systemd credential `notes-keys` (`LoadCredential=` or
/// `LoadCredentialEncrypted=`, found in `$CREDENTIALS_DIRECTORY`). Key material stays in the key
/// files the Keys file names (`file:`, relative to the Keys file's folder: other credentials of the
/// same unit).
struct ServerOptions: Sendable {
    var database: String
    var keysFile: String
    var host = "127.0.0.1"
    var port = 8080
    var readers = 4
    var healthInterval = 15
    var busyTimeout = 10
    /// Seconds a request may take to arrive, head to the end of its body (``RequestReadTimeout``).
    var readTimeout = 10
    /// Seconds a connection may send nothing (before a request's head, or inside one) before it is closed.
    var idleTimeout = 30
    /// Seconds the graceful shutdown may take before the service group cancels what still runs;
    /// cancellation may take 5 s more, so the process ends within this plus 5 s of SIGTERM.
    var shutdownTimeout = 10
    var sizeMB = 0
    var logLevel = Logger.Level.info

    /// The systemd credential that holds the Keys file when `--keys` is not given.
    static let credentialName = "notes-keys"
}

/// The options `serve` and `seed` share: the database, its Keys file, the log level.
struct DatabaseArguments: ParsableArguments {
    @Option(name: .customLong("db"), help: ArgumentHelp("The database file.", valueName: "path"))
    var database: String

    @Option(name: .customLong("keys"), help: ArgumentHelp(
        "The Keys file. Without it, the systemd credential \"\(ServerOptions.credentialName)\" ($CREDENTIALS_DIRECTORY/\(ServerOptions.credentialName)).",
        valueName: "file"))
    var keysFile: String?

    @Option(help: ArgumentHelp("trace, debug, info, notice, warning, error or critical (default: info).", valueName: "level"),
            transform: { text in
                guard let level = Logger.Level(rawValue: text) else {
                    throw ValidationError("--log-level: trace, debug, info, notice, warning, error or critical")
                }
                return level
            })
    var logLevel: Logger.Level = .info

    func validate() throws {
        try RepeatedOptions.refuse(in: CommandLine.arguments.dropFirst())
        _ = try resolvedKeysFile(environment: ProcessInfo.processInfo.environment)
    }

    /// `--keys`, or the credential in `environment`'s `CREDENTIALS_DIRECTORY` (the only variable read).
    func resolvedKeysFile(environment: [String: String]) throws -> String {
        if let keysFile { return keysFile }
        if let folder = environment["CREDENTIALS_DIRECTORY"], !folder.isEmpty { return folder + "/" + ServerOptions.credentialName }
        throw ValidationError("no Keys file: give --keys, or run under systemd with the credential \(ServerOptions.credentialName)")
    }

    /// The options with these values and the defaults for the rest.
    func options() throws -> ServerOptions {
        ServerOptions(database: database, keysFile: try resolvedKeysFile(environment: ProcessInfo.processInfo.environment), logLevel: logLevel)
    }
}

/// Refuses an option given twice: the parser would keep the last value without a word, so that
/// `--port 80 … --port 8080` in a unit file and a drop-in would quietly pick one.
enum RepeatedOptions {
    /// - Throws: `ValidationError` naming the first option that occurs more than once in `arguments`
    ///   (as `--name value` or `--name=value`).
    static func refuse(in arguments: some Collection<String>) throws {
        var seen: Set<Substring> = []
        for argument in arguments where argument.hasPrefix("--") && argument != "--" {
            let name = argument.split(separator: "=", maxSplits: 1)[0]
            guard seen.insert(name).inserted else { throw ValidationError("\(name) was given more than once: give each option once") }
        }
    }
}

/// Checks that `value` of `--name` is in `range`.
func requireNumber(_ value: Int, in range: ClosedRange<Int>, _ name: String) throws {
    guard range.contains(value) else { throw ValidationError("--\(name) must be a number in \(range)") }
}
