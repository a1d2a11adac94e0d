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

    @OptionGroup var selection: DatabaseOptions

    @Option(help: ArgumentHelp("How many databases to work on at once.", valueName: "n"))
    var jobs: Int = 2

    @Flag(help: "Only report which key opens each file; open read-only and write nothing. Exits \(ExitStatus.needsRotation.code) when a file needs rotation, else \(ExitStatus.keyTooOld.code) when a current key is older than its max_key_age_days.")
    var check = false

    @Flag(help: "Print one JSON document instead of lines of text.")
    var json = false

    @Option(help: "How to verify a rotation: schema, pages (every page read back and compared with what was written for the new key, before the rotation commits), quickCheck or integrityCheck.")
    var verify: RotationVerification = OpenOptions().verification

    @Option(help: "How a key change rewrites the file: automatic (the library re-encrypts the pages in parallel under a rollback journal when it can) or engineRekey (always SQLCipher's own rekey, one page at a time).")
    var strategy: RotationStrategy = OpenOptions().rotationStrategy

    @Option(help: ArgumentHelp("Threads one page re-encryption uses for its cryptography (default: one per processor).", valueName: "n"))
    var threads: Int = OpenOptions().rotationThreads

    @OptionGroup var common: CommonOptions

    func validate() throws {
        try selection.validateSelection()
        if !FleetLimits.jobs.contains(jobs) {
            throw ValidationError("--jobs must be between \(FleetLimits.jobs.lowerBound) and \(FleetLimits.jobs.upperBound)")
        }
        if !FleetLimits.rotationThreads.contains(threads) {
            throw ValidationError("--threads must be between \(FleetLimits.rotationThreads.lowerBound) and \(FleetLimits.rotationThreads.upperBound)")
        }
    }

    func run() throws {
        common.prepare()
        let databases = try common.databases(selection.selection)
        let options = OpenOptions(busyTimeout: common.timeout, verification: verify, rotationStrategy: strategy, rotationThreads: threads, logger: Logger(label: "rekey"))
        let printer = OutcomePrinter(json: json)
        let display = ProgressDisplay(enabled: isatty(STDERR_FILENO) == 1, printLines: !json, printer: printer)
        let report = FleetRotation(databases: databases, jobs: jobs, options: options, checkOnly: check).run { progress, outcome in
            display.update(progress, finished: DatabaseOutcome(outcome))
        }
        display.finish()
        let outcomes = report.outcomes.map(DatabaseOutcome.init)
        if json {
            printer.printJSON(outcomes, report: report)
        } else if outcomes.count > 1 {
            printer.printSummary(report)
        }
        var statuses = outcomes.map(\.status)
        if check {
            let old = databases.compactMap { KeyAge($0) }.filter(\.tooOld)
            for age in old { printError(StatusPrinter.keyAgeWarning(age)) }
            if !old.isEmpty { statuses.append(.keyTooOld) }
        }
        let status = ExitStatus.overall(statuses)
        if status != .success { throw ExitCode(status.code) }
    }
}
