import ArgumentParser
import EncryptedSQLite
import Foundation
import Logging

/// `rekey rotate` (the default): rotates one database, several, or every database of the Keys file.
struct Rotate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rotate databases to the current key (the default subcommand).",
        discussion: """
            Finds each database's key list in the Keys file, opens the database with the key that \
            opens it, rotates it to the current (last) key when it is on an older one — or \
            encrypts it, upgrades a legacy file, or applies new cipher settings through a verified \
            export — and verifies the result on a fresh connection. Files already on the current key \
            cost one key attempt, so a run can simply be repeated after an interruption.

            On a terminal a progress bar shows files done, bytes, rate and time left; otherwise one \
            line per database. Several databases end with a summary. Exit codes: \(ExitStatus.documentation)
            """
    )

    @Option(name: .customLong("db"), help: ArgumentHelp("A database file to rotate; repeat for several.", valueName: "path"))
    var databases: [String] = []

    @Flag(help: "Every database the Keys file names (exact paths, and the files its glob patterns match).")
    var all = false

    @Option(help: ArgumentHelp("How many databases to work on at once.", valueName: "n"))
    var jobs: Int = 2

    @Flag(help: "Only report which key opens each file; open read-only and write nothing. Exits \(ExitStatus.needsRotation.code) when a file needs rotation.")
    var check = false

    @Flag(help: "Print one JSON document instead of lines of text.")
    var json = false

    @Option(help: "How to verify a rotation: schema, pages (every page authenticated with the new key before the rotation commits), quickCheck or integrityCheck.")
    var verify: RotationVerification = OpenOptions().verification

    @Option(help: "How a key change rewrites the file: automatic (the library re-encrypts the pages in parallel under a rollback journal when it can) or engineRekey (always SQLCipher's own rekey, one page at a time).")
    var strategy: RotationStrategy = OpenOptions().rotationStrategy

    @Option(help: ArgumentHelp("Threads one page re-encryption uses for its cryptography (default: one per processor).", valueName: "n"))
    var threads: Int = OpenOptions().rotationThreads

    @OptionGroup var common: CommonOptions

    func validate() throws {
        if databases.isEmpty && !all {
            throw ValidationError("give at least one database with --db <path>, or --all for every database of the Keys file")
        }
        if !(1...256).contains(jobs) {
            throw ValidationError("--jobs must be between 1 and 256")
        }
        if !(1...OpenOptions.maximumRotationThreads).contains(threads) {
            throw ValidationError("--threads must be between 1 and \(OpenOptions.maximumRotationThreads)")
        }
    }

    mutating func run() throws {
        common.bootstrapLogging()
        let options = OpenOptions(busyTimeout: common.timeout, verification: verify, rotationStrategy: strategy, rotationThreads: threads, logger: Logger(label: "rekey"))

        var fleet: [FleetDatabase]
        switch Result(catching: { () throws(KeyConfigurationError) in try KeysFile.load(path: common.keysPath) }) {
        case .failure(let error):
            guard !databases.isEmpty else { throw fail(error) }
            fleet = databases.map { FleetDatabase(path: $0, keyError: error) }
        case .success(let keysFile):
            fleet = databases.map { FleetDatabase.named($0, in: keysFile) }
            if all {
                let given = Set(fleet.map(\.path))
                fleet += FleetDatabase.all(in: keysFile).filter { !given.contains($0.path) }
            }
        }
        if fleet.isEmpty {
            FileHandle.standardError.write(Data("rekey: the Keys file \(common.keysPath) names no database (its patterns match no file); check its paths and glob patterns\n".utf8))
            throw ExitCode(ExitStatus.usage.code)
        }

        let printer = OutcomePrinter(json: json)
        let display = ProgressDisplay(enabled: isatty(STDERR_FILENO) == 1, printLines: !json, printer: printer)
        let report = FleetRotation(databases: fleet, jobs: jobs, options: options, checkOnly: check).run { progress, outcome in
            display.update(progress, finished: DatabaseOutcome(outcome))
        }
        display.finish()
        let outcomes = report.outcomes.map(DatabaseOutcome.init)
        if json {
            printer.printJSON(outcomes, report: report)
        } else if outcomes.count > 1 {
            printer.printSummary(report)
        }
        let status = ExitStatus.overall(outcomes.map(\.status))
        if status != .success { throw ExitCode(status.code) }
    }

    private func fail(_ error: KeyConfigurationError) -> ExitCode {
        FileHandle.standardError.write(Data("rekey: \(error.description)\n".utf8))
        return ExitCode(ExitStatus(error).code)
    }
}
