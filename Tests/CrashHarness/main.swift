// crash-harness: a small program the crash tests run and kill -9 at random instants, and that
// other tests run in a child process when they need a process-wide setting such as the umask.
//
//   crash-harness migrate <database>   opens (creating it) and applies HarnessMigrations
//   crash-harness write <database>     commits rows 1, 2, 3, … to `ledger`, one transaction each,
//                                      printing "committed N" after each commit returns; when its
//                                      connection stops working (another process rotated the file),
//                                      it opens the file again with the key list and goes on; with
//                                      HARNESS_BACKGROUND=1 it rotates the file itself in the
//                                      background meanwhile and prints "rotated <method>" at the end
//   crash-harness modes <database> wal|delete
//                                      creates the database in that journal mode and writes to it,
//                                      printing "<suffix> <octal mode>" for the database ("db") and
//                                      for each side file while it exists (-journal inside a write,
//                                      -wal and -shm while the connection is open)
//   crash-harness start <Keys> <database> wal|delete
//                                      opens the database from the Keys file as a service starting up
//                                      (rotating it if needed), writes a row, reads a count, exits
//   crash-harness serve <Keys> <database> wal|delete <seconds>
//                                      a service writing and reading while others rotate (Service.swift)
//
// Keys come from the environment, never argv: HARNESS_KEY_HEX (migrate, modes), HARNESS_OLD_KEY_HEX
// and HARNESS_NEW_KEY_HEX (write), 64 hex digits each. PAUSING_VFS_FOLDER and PAUSING_VFS_STOP_AT
// stop the process for good at one file operation, for a test to kill it there
// (VFSWatch.stopFromEnvironment); HARNESS_ROTATION_STRATEGY=engineRekey picks the engine's rekey.
import EncryptedSQLite
import Foundation
import TestSupport

// A test that kills this process at a chosen file operation names it in the environment.
VFSWatch.stopFromEnvironment()

let arguments = CommandLine.arguments
guard (arguments.count == 3 && ["migrate", "write"].contains(arguments[1]))
    || (arguments.count == 4 && arguments[1] == "modes" && ["wal", "delete"].contains(arguments[3]))
    || (arguments.count == 5 && arguments[1] == "start" && ["wal", "delete"].contains(arguments[4]))
    || (arguments.count == 6 && arguments[1] == "serve" && ["wal", "delete"].contains(arguments[4]) && Double(arguments[5]) != nil)
else {
    FileHandle.standardError.write(Data("usage: crash-harness migrate|write <database> | modes <database> wal|delete | start <Keys> <database> wal|delete | serve <Keys> <database> wal|delete <seconds>\n".utf8))
    exit(64)
}
let path = arguments[2]

func fail(_ error: any Error) -> Never {
    FileHandle.standardError.write(Data("crash-harness: \(error)\n".utf8))
    exit(1)
}

/// Prints `<label> <octal permission bits>` for `file` when it exists.
func printMode(_ label: String, _ file: String) {
    var status = stat()
    guard stat(file, &status) == 0 else { return }
    print("\(label) \(String(status.st_mode & 0o7777, radix: 8))")
}

switch arguments[1] {
case "start":
    Service.start(keysFile: arguments[2], path: arguments[3], journalMode: arguments[4])

case "serve":
    Service.serve(keysFile: arguments[2], path: arguments[3], journalMode: arguments[4], seconds: Double(arguments[5])!)

case "modes":
    do {
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "harness", source: .environment(variable: "HARNESS_KEY_HEX", format: .hex))])
        let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(createIfMissing: true))
        printMode("db", path)
        try database.writeWithoutTransaction { db in
            _ = try db.queryValue("PRAGMA journal_mode = \(arguments[3] == "wal" ? "WAL" : "DELETE")", as: String.self)
        }
        try database.write { db in
            try db.execute("CREATE TABLE IF NOT EXISTS notes(id INTEGER PRIMARY KEY, body BLOB)")
            try db.execute("INSERT INTO notes(body) VALUES (randomblob(5000))")
            printMode("-journal", path + "-journal")  // exists inside a write in rollback mode
        }
        printMode("-wal", path + "-wal")
        printMode("-shm", path + "-shm")
    } catch {
        fail(error)
    }

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
    // The writer never rotates: the rotation is the other process's job. With HARNESS_BACKGROUND=1
    // it is a service that rotates its own file in the background while it writes
    // (OpenOptions.backgroundRotation), printing "rotated <method>" when the rotation ends.
    let background = ProcessInfo.processInfo.environment["HARNESS_BACKGROUND"] == "1"
    var options = OpenOptions(rotateToCurrentKey: background, busyTimeout: .seconds(10))
    options.backgroundRotation = background
    func open() -> EncryptedDatabase {
        while true {
            if let database = try? EncryptedDatabase(path: path, keys: keys, options: options) { return database }
            usleep(2000)  // paces the retries of an open that failed (the file was busy); not an order
        }
    }
    var database = open()
    if let rotation = database.backgroundRotation {
        let database = database
        Thread {
            // A poll of the state the library exposes (not an order from the sleep): the line goes
            // out once the rotation has ended, whenever that is.
            while !rotation.state.isFinal { usleep(1000) }
            let method = database.report.rotation.map { $0.method.rawValue } ?? "\(rotation.state)"
            FileHandle.standardOutput.write(Data("rotated \(method)\n".utf8))
        }.start()
    }
    var next = 1
    while true {
        do {
            try database.write { db in try db.execute("INSERT INTO ledger(n, payload) VALUES (?, randomblob(100))", [next]) }
            // Reported only once the commit has returned: every reported row must survive.
            FileHandle.standardOutput.write(Data("committed \(next)\n".utf8))
            next += 1
            usleep(1000)  // paces the commits (about one a millisecond); not an order
        } catch {
            // The file changed key under this connection (or was busy past the timeout): open it
            // again with the key list, as an application would.
            database = open()
        }
    }
}
