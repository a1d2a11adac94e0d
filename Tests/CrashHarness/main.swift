// crash-harness: a small program the crash tests run and kill -9 at random instants.
//
//   crash-harness migrate <database>    opens (creating it) and applies HarnessMigrations
//
// The key comes from the environment variable HARNESS_KEY_HEX (64 hex digits), never argv.
import EncryptedSQLite
import Foundation
import TestSupport

let arguments = CommandLine.arguments
guard arguments.count == 3, arguments[1] == "migrate" else {
    FileHandle.standardError.write(Data("usage: crash-harness migrate <database>\n".utf8))
    exit(64)
}
do {
    let path = arguments[2]
    let rows = Int(ProcessInfo.processInfo.environment["HARNESS_LEDGER_ROWS"] ?? "") ?? 150_000
    let keys = try KeyList(database: path, keys: [DatabaseKey(id: "harness", source: .environment(variable: "HARNESS_KEY_HEX", format: .hex))])
    let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(createIfMissing: true), migrator: HarnessMigrations.migrator(rows: rows))
    print("applied: \(database.appliedMigrations.joined(separator: ","))")
} catch {
    FileHandle.standardError.write(Data("crash-harness: \(error)\n".utf8))
    exit(1)
}
