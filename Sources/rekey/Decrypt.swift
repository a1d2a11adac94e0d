import ArgumentParser
import EncryptedSQLite
import Foundation

/// `rekey decrypt`: an unencrypted copy, only with explicit confirmation, never overwriting.
struct Decrypt: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write an UNENCRYPTED copy of a database to a new file (requires --confirm-plaintext; never overwrites).")

    @Option(name: .customLong("db"), help: ArgumentHelp("The encrypted database.", valueName: "path"))
    var database: String

    @Option(help: ArgumentHelp("The new, unencrypted file; it must not exist.", valueName: "path"))
    var out: String

    @Flag(help: "Confirm that you want the data written to disk in the clear.")
    var confirmPlaintext = false

    @OptionGroup var common: CommonOptions

    func validate() throws {
        if !confirmPlaintext {
            throw ValidationError("decrypt writes the database's content to disk in the clear; add --confirm-plaintext if that is what you want")
        }
    }

    func run() throws {
        common.prepare()
        let keys = try common.keyList(for: database)
        do {
            try DatabaseInspection.decryptedCopy(path: database, keys: keys, to: out, busyTimeout: common.timeout)
        } catch {
            throw fail(error)
        }
        Swift.print("\(database): unencrypted copy written to \(out) (verified); it holds the data in the clear, delete it when done")
    }
}
