import Foundation
import Logging

/// The command line: `notes-server serve …` or `notes-server seed …` (see the README).
///
/// Keys never come from the environment or the command line: `--keys` names a Keys file, and
/// without it the server reads the systemd credential `notes-keys` (`LoadCredential=` or
/// `LoadCredentialEncrypted=`, found in `$CREDENTIALS_DIRECTORY`). Key material stays in the key
/// files the Keys file names (`file:`, relative to the Keys file's folder: other credentials of the
/// same unit).
struct ServerOptions: Sendable {
    enum Command: String, Sendable { case serve, seed }

    var command: Command
    var database: String
    var keysFile: String
    var host = "127.0.0.1"
    var port = 8080
    var readers = 4
    var healthInterval = 15
    var busyTimeout = 10
    var sizeMB = 0
    var logLevel = Logger.Level.info

    /// The systemd credential that holds the Keys file when `--keys` is not given.
    static let credentialName = "notes-keys"

    static let usage = """
        usage: notes-server serve --db PATH [--keys FILE] [--host 127.0.0.1] [--port 8080] [--readers 4]
                                  [--busy-timeout SECONDS] [--health-interval SECONDS] [--log-level info]
               notes-server seed  --db PATH [--keys FILE] --size-mb N
        Without --keys, the Keys file is the systemd credential "\(credentialName)" ($CREDENTIALS_DIRECTORY/\(credentialName)).
        """

    /// Parses `arguments` (without the program's name); `environment` is read for
    /// `CREDENTIALS_DIRECTORY` only.
    init(arguments: [String], environment: [String: String]) throws(UsageError) {
        guard let first = arguments.first, let command = Command(rawValue: first) else { throw UsageError("name a command: serve or seed") }
        self.command = command
        var values: [String: String] = [:]
        var rest = arguments.dropFirst()
        while let name = rest.popFirst() {
            guard name.hasPrefix("--"), let value = rest.popFirst() else { throw UsageError("unexpected argument \(name)") }
            values[String(name.dropFirst(2))] = value
        }
        func take(_ name: String) -> String? { values.removeValue(forKey: name) }
        func number(_ name: String, _ range: ClosedRange<Int>) throws(UsageError) -> Int? {
            guard let text = take(name) else { return nil }
            guard let value = Int(text), range.contains(value) else { throw UsageError("--\(name) must be a number in \(range)") }
            return value
        }
        guard let database = take("db") else { throw UsageError("--db is required") }
        self.database = database
        if let keys = take("keys") {
            keysFile = keys
        } else if let folder = environment["CREDENTIALS_DIRECTORY"], !folder.isEmpty {
            keysFile = folder + "/" + Self.credentialName
        } else {
            throw UsageError("no Keys file: give --keys, or run under systemd with the credential \(Self.credentialName)")
        }
        if let host = take("host") { self.host = host }
        port = try number("port", 0...65535) ?? port
        readers = try number("readers", 0...64) ?? readers
        healthInterval = try number("health-interval", 0...86400) ?? healthInterval
        busyTimeout = try number("busy-timeout", 1...3600) ?? busyTimeout
        sizeMB = try number("size-mb", 0...1_000_000) ?? sizeMB
        if let level = take("log-level") {
            guard let parsed = Logger.Level(rawValue: level) else { throw UsageError("--log-level: trace, debug, info, notice, warning, error or critical") }
            logLevel = parsed
        }
        if let unknown = values.keys.sorted().first { throw UsageError("unknown option --\(unknown)") }
    }

    /// A bad command line: the message, then the usage.
    struct UsageError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
