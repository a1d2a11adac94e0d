import ArgumentParser
import EncryptedSQLite
import Foundation

/// `rekey status`: each database's state, read-only.
struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show which key opens each database and its journal mode, page size and count, kdf_iter and size, without changing it.")

    @OptionGroup var selection: DatabaseOptions

    @Flag(help: "Print one JSON document instead of lines of text.")
    var json = false

    @OptionGroup var common: CommonOptions

    func validate() throws {
        try selection.validateSelection()
    }

    func run() throws {
        common.bootstrapLogging()
        let databases = try common.databases(selection.selection)
        let printer = StatusPrinter(json: json)
        let report = FleetInspection(databases: databases, busyTimeout: common.timeout).run { _, outcome in
            printer.printLine(outcome)
        }
        printer.printJSON(report)
        let status = ExitStatus.overall(report.outcomes.map(ExitStatus.init))
        if status != .success { throw ExitCode(status.code) }
    }
}
