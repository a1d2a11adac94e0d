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
        subcommands: [Rotate.self, Status.self, Dump.self, Decrypt.self],
        defaultSubcommand: Rotate.self
    )
}

extension RotationVerification: ExpressibleByArgument {}
extension RotationStrategy: ExpressibleByArgument {}
