import DurableFiles
import EncryptedSQLite
import Foundation
import Logging
import TestSupport

/// The small service of the live-rotation tests (`LiveRotationTests`): opens its database from a
/// Keys file, as an application should, and writes and reads while other processes rotate it.
enum Service {
    /// `start <Keys> <database> wal|delete`: opens the database (rotating it when it is on an older
    /// key), writes one row, reads the count, and prints `opened-with=<id> rotated=<bool>`.
    static func start(keysFile: String, path: String, journalMode: String) {
        let name = ProcessInfo.processInfo.environment["SERVICE_NAME"] ?? "start"
        do {
            let database = try open(keysFile: keysFile, path: path, journalMode: journalMode)
            try database.write { db in
                try db.execute("INSERT OR IGNORE INTO ledger(service, n, payload) VALUES (?, 1, randomblob(100))", [name])
            }
            let count = try database.read { db in try db.queryValue("SELECT count(*) FROM ledger", as: Int.self) ?? 0 }
            print("opened-with=\(database.report.openedWithKeyID) rotated=\(database.report.rotated) count=\(count)")
        } catch {
            FileHandle.standardError.write(Data("crash-harness: \(error)\n".utf8))
            exit((error as? EncryptedDatabaseError)?.category == .busy ? 75 : 1)
        }
    }

    /// `serve <Keys> <database> wal|delete <seconds>`: a writer thread commits rows
    /// `(SERVICE_NAME, 1, 2, …)` to `ledger` every SERVICE_INTERVAL_MS (5) and prints
    /// `committed N` after each commit returns; two reader threads count rows as often, printing
    /// `read by <0|1>` after each read returns (so that a test can wait for reads). Every
    /// failed operation prints `failed <operation>: <error>`. When the file `<database>.rotate-<name>`
    /// appears, the writer thread removes it and calls `rotateToCurrentKey()` (a rotation started
    /// by the service). It stops after `seconds`, or as soon as the file `<database>.stop` appears.
    /// At the end: `summary operations=… failed=… longest-pause-ms=…`.
    static func serve(keysFile: String, path: String, journalMode: String, seconds: Double) {
        let environment = ProcessInfo.processInfo.environment
        let name = environment["SERVICE_NAME"] ?? "service"
        let interval = useconds_t((Int(environment["SERVICE_INTERVAL_MS"] ?? "") ?? 5) * 1000)
        let database: EncryptedDatabase
        do {
            database = try open(keysFile: keysFile, path: path, journalMode: journalMode)
        } catch {
            FileHandle.standardError.write(Data("crash-harness: \(error)\n".utf8))
            exit(error.category == .busy ? 75 : 1)
        }
        let tally = Tally()
        let say = tally.say, record = tally.record
        let end = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        let stop = path + ".stop"
        @Sendable func running() -> Bool { ContinuousClock.now < end && !FileManager.default.fileExists(atPath: stop) }
        let trigger = path + ".rotate-" + name
        let readersDone = DispatchGroup()
        let readers = (0..<2).map { index in
            Thread {
                while running() {
                    record("read") {
                        _ = try database.read { db in try db.queryValue("SELECT count(*) FROM ledger", as: Int.self) }
                        say("read by \(index)")
                    }
                    usleep(interval)  // paces the reads (one every SERVICE_INTERVAL_MS); not an order
                }
                readersDone.leave()
            }
        }
        for reader in readers {
            readersDone.enter()
            reader.start()
        }
        var next = 1
        while running() {
            if FileManager.default.fileExists(atPath: trigger) {
                try? FileManager.default.removeItem(atPath: trigger)
                let start = ContinuousClock.now
                record("rotate") {
                    let rotation = try database.rotateToCurrentKey()
                    say("rotated by service to=\(database.report.rotation?.toKeyID ?? "-") did=\(rotation != nil) ms=\(Int((ContinuousClock.now - start).seconds * 1000))")
                }
            }
            record("write") {
                try database.write { db in
                    try db.execute("INSERT INTO ledger(service, n, payload) VALUES (?, ?, randomblob(100))", [name, next])
                }
                // Reported only once the commit has returned: every reported row must survive.
                say("committed \(next)")
                next += 1
            }
            usleep(interval)  // paces the writes (one every SERVICE_INTERVAL_MS); not an order
        }
        readersDone.wait()  // a join: both reader threads have ended
        let final = tally.stats.withLock { $0 }
        say("summary operations=\(final.operations) failed=\(final.failed) longest-pause-ms=\(Int(final.longest.seconds * 1000)) key=\(database.report.currentKeyID)")
    }

    private static func open(keysFile: String, path: String, journalMode: String) throws(EncryptedDatabaseError) -> EncryptedDatabase {
        let readers = journalMode == "wal" ? 4 : 0
        var options = OpenOptions(busyTimeout: .seconds(10), concurrentReaders: readers, logger: logger)
        if ProcessInfo.processInfo.environment["HARNESS_ROTATION_STRATEGY"] == "engineRekey" { options.rotationStrategy = .engineRekey }
        return try EncryptedDatabase(path: path, keysFile: keysFile, options: options)
    }

    /// The library's log on standard error, at the level HARNESS_LOG names (`debug`, `info`, …),
    /// prefixed with SERVICE_NAME; none without it.
    static var logger: Logger {
        let environment = ProcessInfo.processInfo.environment
        guard let level = environment["HARNESS_LOG"].flatMap(Logger.Level.init(rawValue:)) else {
            return Logger(label: "EncryptedSQLite", factory: { _ in SwiftLogNoOpLogHandler() })
        }
        var logger = Logger(label: environment["SERVICE_NAME"] ?? "crash-harness", factory: { StreamLogHandler.standardError(label: $0) })
        logger.logLevel = level
        return logger
    }
}

/// What the service's threads did, and their output lines (one writer at a time).
final class Tally: Sendable {
    let stats = Locked((operations: 0, failed: 0, longest: Duration.zero))
    private let output = Locked(())

    @Sendable func say(_ line: String) {
        output.withLock { _ in FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
    }

    /// Runs one operation, counting it, its failure and its duration.
    @Sendable func record(_ operation: String, _ body: () throws -> Void) {
        let start = ContinuousClock.now
        let failure: (any Error)?
        do { try body(); failure = nil } catch { failure = error }
        let took = ContinuousClock.now - start
        stats.withLock { stats in
            stats.operations += 1
            if failure != nil { stats.failed += 1 }
            stats.longest = max(stats.longest, took)
        }
        if let failure { say("failed \(operation): \(failure)") }
    }
}
