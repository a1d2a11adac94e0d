// crash-harness: a small program the crash tests run and kill -9 at random instants.
//
//   crash-harness migrate <database>   opens (creating it) and applies HarnessMigrations
//   crash-harness write <database>     commits rows 1, 2, 3, … to `ledger`, one transaction each,
//                                      printing "committed N" after each commit returns; when its
//                                      connection stops working (another process rotated the file),
//                                      it opens the file again with the key list and goes on
//
// Keys come from the environment, never argv: HARNESS_KEY_HEX (migrate), HARNESS_OLD_KEY_HEX and
// HARNESS_NEW_KEY_HEX (write), 64 hex digits each.
import EncryptedSQLite
import Foundation
import TestSupport

let arguments = CommandLine.arguments
guard arguments.count == 3, ["migrate", "write"].contains(arguments[1]) else {
    FileHandle.standardError.write(Data("usage: crash-harness migrate|write <database>\n".utf8))
    exit(64)
}
let path = arguments[2]

func fail(_ error: any Error) -> Never {
    FileHandle.standardError.write(Data("crash-harness: \(error)\n".utf8))
    exit(1)
}

switch arguments[1] {
case "migrate":
    do {
        let rows = Int(ProcessInfo.processInfo.environment["HARNESS_LEDGER_ROWS"] ?? "") ?? 150_000
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "harness", source: .environment(variable: "HARNESS_KEY_HEX", format: .hex))])
        let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(createIfMissing: true), migrator: HarnessMigrations.migrator(rows: rows))
        print("applied: \(database.appliedMigrations.joined(separator: ","))")
    } catch {
        fail(error)
    }

default:
    let keys: KeyList
    do {
        keys = try KeyList(database: path, keys: [
            DatabaseKey(id: "old", source: .environment(variable: "HARNESS_OLD_KEY_HEX", format: .hex)),
            DatabaseKey(id: "new", source: .environment(variable: "HARNESS_NEW_KEY_HEX", format: .hex)),
        ])
    } catch {
        fail(error)
    }
    // The writer never rotates: the rotation is the other process's job.
    let options = OpenOptions(rotateToCurrentKey: false, busyTimeout: .seconds(10))
    func open() -> EncryptedDatabase {
        while true {
            if let database = try? EncryptedDatabase(path: path, keys: keys, options: options) { return database }
            usleep(2000)
        }
    }
    var database = open()
    var next = 1
    while true {
        do {
            try database.write { db in try db.execute("INSERT INTO ledger(n, payload) VALUES (?, randomblob(100))", [next]) }
            // Reported only once the commit has returned: every reported row must survive.
            FileHandle.standardOutput.write(Data("committed \(next)\n".utf8))
            next += 1
            usleep(1000)
        } catch {
            // The file changed key under this connection (or was busy past the timeout): open it
            // again with the key list, as an application would.
            database = open()
        }
    }
}
