import ArgumentParser
import EncryptedSQLite
import Foundation

/// `rekey status`: each database's state, read-only.
struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show which key opens each database and its journal mode, page size and count, kdf_iter and size, without changing it.",
        discussion: "Exits \(ExitStatus.keyTooOld.code) when a current key is older than its max_key_age_days, and \(ExitStatus.ioError.code) when --health finds a page that does not authenticate. Exit codes: \(ExitStatus.documentation)")

    @OptionGroup var selection: DatabaseOptions

    @Flag(help: "Also check each file's health: every page's HMAC (cipher_integrity_check on SQLCipher 4), journal and -wal sizes.")
    var health = false

    @Flag(help: "Print one JSON document instead of lines of text.")
    var json = false

    @OptionGroup var common: CommonOptions

    func validate() throws {
        try selection.validateSelection()
    }

    func run() throws {
        common.prepare()
        let databases = try common.databases(selection.selection)
        let printer = StatusPrinter(json: json)
        let report = FleetInspection(databases: databases, busyTimeout: common.timeout).run { _, outcome in
            printer.printLine(outcome)
        }
        let ages = databases.compactMap { KeyAge($0) }
        let healths = health ? FleetInspection.health(of: databases, busyTimeout: common.timeout) : []
        printer.printAges(ages, healths: healths)
        printer.printJSON(report, ages: ages, healths: healths)
        var statuses = report.outcomes.map(ExitStatus.init)
        if ages.contains(where: \.tooOld) { statuses.append(.keyTooOld) }
        if healths.contains(where: { (try? $0.get().integrity) == .failed }) { statuses.append(.ioError) }
        let status = ExitStatus.overall(statuses)
        if status != .success { throw ExitCode(status.code) }
    }
}
