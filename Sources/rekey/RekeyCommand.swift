import ArgumentParser
import EncryptedSQLite
import Foundation

/// `rekey`: rotates encrypted databases to the current key of their key list, and inspects them.
@main
struct RekeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rekey",
        abstract: "Rotate SQLCipher databases to the current key of their key list, and inspect them.",
        discussion: """
            Without a subcommand, `rekey` rotates (`rekey --db app.sqlite` is `rekey rotate --db app.sqlite`). \
            Key material is read from the Keys file, environment variables and key files only; it is \
            never accepted on the command line and never printed.

            Exit codes: \(ExitStatus.documentation)
            """,
        version: EncryptedSQLitePackage.version,
        subcommands: [Rotate.self, Status.self, Dump.self, Decrypt.self, Backup.self, Keys.self],
        defaultSubcommand: Rotate.self
    )

    /// Parses the command line and runs the chosen subcommand. A parse error's message never
    /// repeats a value typed on the command line (`--jobs <secret>` would otherwise be echoed as
    /// "The value '<secret>' is invalid"), because that value may be a key someone tried to pass.
    static func main() {
        // First, before any key is read: no core dumps, no inspection by other processes of this
        // user, and a crash prints no memory and ends the process (see ProcessHardening).
        let hardening = ProcessHardening.apply()
        if !hardening.problems.isEmpty {
            printError("warning: process hardening incomplete: \(hardening.problems.joined(separator: "; "))")
        }
        atexit {
            let unlocked = ProcessHardening.unlockedSecretBuffers
            if unlocked > 0 {
                printError("warning: \(unlocked) key buffer(s) could not be locked in memory (RLIMIT_MEMLOCK reached) and may have been swapped; they were still kept out of core dumps and zeroed")
            }
        }
        var command: any ParsableCommand
        do {
            command = try parseAsRoot()
        } catch {
            exitWithoutEchoingArguments(error)
        }
        do {
            try command.run()
        } catch {
            exit(withError: error)
        }
    }

    private static func exitWithoutEchoingArguments(_ error: any Error) -> Never {
        let message = parseErrorMessage(error, arguments: Array(CommandLine.arguments.dropFirst()))
        let status = exitCode(for: error)
        if !message.isEmpty {
            let stream = status == .success ? FileHandle.standardOutput : FileHandle.standardError
            stream.write(Data((message + "\n").utf8))
        }
        Foundation.exit(status.rawValue)
    }

    /// The message of a parse or validation error, with every value typed in `arguments` replaced
    /// by "(not shown)".
    static func parseErrorMessage(_ error: any Error, arguments: [String]) -> String {
        var message = fullMessage(for: error)
        for value in typedValues(arguments[...]) {
            message = message.replacingOccurrences(of: "'\(value)'", with: "(not shown)")
        }
        return message
    }

    /// The values typed on the command line: each argument that is not an option name, and the
    /// part after `=` of `--name=value`. (Subcommand names are among them; hiding one is harmless.)
    private static func typedValues(_ arguments: ArraySlice<String>) -> [String] {
        arguments.compactMap { argument in
            guard argument.hasPrefix("-") else { return argument }
            guard let equals = argument.firstIndex(of: "=") else { return nil }
            let value = argument[argument.index(after: equals)...]
            return value.isEmpty ? nil : String(value)
        }
    }
}

extension RotationVerification: ExpressibleByArgument {}
extension RotationStrategy: ExpressibleByArgument {}
