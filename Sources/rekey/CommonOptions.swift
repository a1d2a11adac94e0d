import ArgumentParser
import EncryptedSQLite
import Foundation
import Logging

/// The options every subcommand shares: the Keys file, the busy timeout, logging, and the guard
/// that refuses unknown arguments without echoing them (they may be a key someone tried to pass).
struct CommonOptions: ParsableArguments {
    @Option(name: .customLong("keys"), help: ArgumentHelp("The Keys file (default: $\(Self.keysFileVariable), else ./Keys).", valueName: "path"))
    var keysFile: String?

    @Option(help: ArgumentHelp("Seconds to wait for another process's lock before failing.", valueName: "seconds"))
    var busyTimeout: Double = 5

    @Flag(help: "Do not check the owner and mode of the Keys file, key files and their folders (for tests and demos; says so on standard error).")
    var noStrictModes = false

    @Flag(name: .shortAndLong, help: "Log each step to standard error (key ids and timings, never key material).")
    var verbose = false

    /// Everything the parser does not know. Collected so that it is refused without being echoed.
    @Argument(parsing: .allUnrecognized, help: .hidden)
    var unrecognized: [String] = []

    static let keysFileVariable = "REKEY_KEYS_FILE"

    func validate() throws {
        if !unrecognized.isEmpty {
            let keyLike = unrecognized.contains { argument in
                let name = argument.lowercased()
                return ["--key", "--passphrase", "--password", "--hex", "--secret", "-k"].contains { name.hasPrefix($0) }
            }
            if keyLike {
                throw ValidationError("key material is not accepted on the command line (it would show in the process list and shell history); put it in the Keys file, an environment variable or a key file")
            }
            throw ValidationError("\(unrecognized.count) unrecognized argument(s); they are not shown in case they hold a secret. See --help.")
        }
        if FleetLimits.busyTimeout(seconds: busyTimeout) == nil {
            let range = FleetLimits.busyTimeout
            throw ValidationError("--busy-timeout must be between \(range.lowerBound.components.seconds) and \(range.upperBound.components.seconds) seconds")
        }
    }

    // getenv, not ProcessInfo.environment: that would copy every variable, key values included, into Strings.
    var keysPath: String { keysFile ?? getenv(Self.keysFileVariable).map { String(cString: $0) } ?? "Keys" }
    /// The busy timeout (checked by `validate()`).
    var timeout: Duration { FleetLimits.busyTimeout(seconds: busyTimeout) ?? FleetLimits.busyTimeout.lowerBound }

    /// Applies --no-strict-modes (with a warning) and sets up logging; first thing in every `run()`.
    func prepare() {
        if noStrictModes {
            StrictModes.isEnabled = false
            printError("warning: --no-strict-modes: the owner and mode of the Keys file, key files and their folders are NOT checked")
        }
        let level: Logger.Level = verbose ? .info : .warning
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }

    /// The databases `selection` names, resolved by the library against the Keys file; or prints
    /// why there are none and exits with the matching status.
    func databases(_ selection: DatabaseSelection) throws -> [FleetDatabase] {
        do {
            return try selection.databases(inKeysFileAt: keysPath)
        } catch {
            printError(error.description)
            throw ExitCode(ExitStatus(error).code)
        }
    }

    /// The key list of one database; or prints why there is none and exits with the matching status.
    func keyList(for path: String) throws -> KeyList {
        guard let database = try databases(.one(path)).first else { throw ExitCode(ExitStatus.usage.code) }
        switch database.keys {
        case .success(let keys):
            return keys
        case .failure(let error):
            printError(error.description)
            throw ExitCode(ExitStatus(error).code)
        }
    }
}

/// Prints `rekey: <message>` on standard error.
func printError(_ message: String) {
    FileHandle.standardError.write(Data("rekey: \(message)\n".utf8))
}

/// Prints a database error and exits with its status.
func fail(_ error: EncryptedDatabaseError) -> ExitCode {
    printError(error.description)
    return ExitCode(ExitStatus(error).code)
}
