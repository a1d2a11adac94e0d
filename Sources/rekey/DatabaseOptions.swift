import ArgumentParser
import EncryptedSQLite

/// `--db` and `--all`: which databases a subcommand works on. Parsed here; the library's
/// `DatabaseSelection` resolves them against the Keys file (order, `--all` matching nothing, a
/// path the Keys file does not list).
struct DatabaseOptions: ParsableArguments {
    @Option(name: .customLong("db"), help: ArgumentHelp("A database file; repeat for several.", valueName: "path"))
    var databases: [String] = []

    @Flag(help: "Every database the Keys file names (exact paths, and the files its glob patterns match).")
    var all = false

    var selection: DatabaseSelection { DatabaseSelection(paths: databases, all: all) }

    /// Refuses an empty selection. Called from the command's `validate()`, which runs after
    /// `CommonOptions` has refused unknown arguments (a key typed on the command line is
    /// reported as such, not as a missing `--db`).
    func validateSelection() throws {
        if selection.isEmpty {
            throw ValidationError("give at least one database with --db <path>, or --all for every database of the Keys file")
        }
    }
}
