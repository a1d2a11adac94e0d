import ArgumentParser
import EncryptedSQLite
import Foundation
import Logging

/// `rekey`: rotates encrypted databases to the current key of their key list.
@main
struct RekeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rekey",
        abstract: "Rotate SQLCipher databases to the current key of their key list.",
        discussion: """
            Finds each database's key list in the Keys file, opens the database with the key that \
            opens it, rotates it to the current (last) key when it is on an older one, and verifies \
            the result on a fresh connection. Key material is read from the Keys file, environment \
            variables and key files only; it is never accepted on the command line and never printed.

            Exit codes: \(ExitStatus.documentation)
            """
    )

    @Option(name: .customLong("db"), help: ArgumentHelp("A database file to rotate; repeat for several.", valueName: "path"))
    var databases: [String] = []

    @Option(name: .customLong("keys"), help: ArgumentHelp("The Keys file (default: $\(keysFileVariable), else ./Keys).", valueName: "path"))
    var keysFile: String?

    @Flag(help: "Only report which key opens each file; open read-only and write nothing. Exits \(ExitStatus.needsRotation.code) when a file needs rotation.")
    var check = false

    @Flag(help: "Print one JSON document instead of lines of text.")
    var json = false

    @Option(help: ArgumentHelp("Seconds to wait for another process's lock before failing.", valueName: "seconds"))
    var busyTimeout: Double = 5

    @Option(help: "How to verify a rotation: schema, quickCheck or integrityCheck.")
    var verify: RotationVerification = .quickCheck

    @Flag(name: .shortAndLong, help: "Log each step to standard error (key ids and timings, never key material).")
    var verbose = false

    /// Everything the parser does not know. Collected so that it is refused without being echoed:
    /// it may be a key someone tried to pass on the command line.
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
        if databases.isEmpty {
            throw ValidationError("give at least one database with --db <path>")
        }
        if !(busyTimeout >= 0 && busyTimeout <= 86_400) {
            throw ValidationError("--busy-timeout must be between 0 and 86400 seconds")
        }
    }

    mutating func run() throws {
        let level: Logger.Level = verbose ? .info : .warning
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let keysPath = keysFile ?? ProcessInfo.processInfo.environment[Self.keysFileVariable] ?? "Keys"
        let options = OpenOptions(
            busyTimeout: .milliseconds(Int64(busyTimeout * 1000)), verification: verify,
            logger: Logger(label: "rekey"))

        let outcomes: [DatabaseOutcome]
        switch Result(catching: { () throws(KeyConfigurationError) in try KeysFile.load(path: keysPath) }) {
        case .failure(let error):
            outcomes = databases.map { DatabaseOutcome(path: $0, failure: .keys(error)) }
        case .success(let keys):
            outcomes = databases.map { path in
                check ? DatabaseOutcome.check(path: path, keysFile: keys, options: options)
                      : DatabaseOutcome.rotate(path: path, keysFile: keys, options: options)
            }
        }
        let printer = OutcomePrinter(json: json)
        printer.print(outcomes)
        let status = ExitStatus.overall(outcomes.map(\.status))
        if status != .success { throw ExitCode(status.code) }
    }
}

extension RotationVerification: ExpressibleByArgument {}
