import EncryptedSQLite
import FluentEncryptedSQLiteDriver
import FluentKit
import Foundation
import Logging
import ServiceLifecycle
import XCTest

/// Shutdown under swift-service-lifecycle, as a service that is not a Vapor app runs Fluent: a
/// `ServiceGroup` holds the databases and a writer; graceful shutdown (what SIGTERM triggers)
/// stops them in reverse order. Checked with the `sqlcipher` shell afterwards: every write the
/// writer saw acknowledged is in the file, on the current key.
final class LifecycleTests: XCTestCase {
    override class func setUp() {
        XCTAssert(isLoggingConfigured)
    }

    /// Owns the app's `Databases`: runs until graceful shutdown, then shuts them down, which
    /// waits for the writes already queued and closes every connection of the file.
    struct DatabasesService: Service {
        let databases: Databases
        func run() async throws {
            try? await gracefulShutdown()
            await databases.shutdownAsync()
        }
    }

    /// What the writer saw: its acknowledged notes and the error that ended it.
    final class WriterLog: @unchecked Sendable {
        private let lock = NSLock()
        // Invariant: only touched with `lock` held.
        private var acknowledged: [String] = []
        private var ending: (any Error)?

        func acknowledge(_ text: String) { lock.withLock { acknowledged.append(text) } }
        func end(_ error: any Error) { lock.withLock { ending = error } }
        var seen: (acknowledged: [String], ending: (any Error)?) { lock.withLock { (acknowledged, ending) } }
    }

    /// Inserts notes one after another until graceful shutdown, or until the database is closed
    /// under it; remembers each acknowledged one and what ended it.
    struct Writer: Service {
        let database: any Database
        let log: WriterLog
        let ready: AsyncStream<Void>.Continuation

        func run() async throws {
            var number = 0
            while !Task.isShuttingDownGracefully {
                let text = "note \(number)"
                do {
                    try await DriverTests.Note(text: text).create(on: database)
                } catch {
                    log.end(error)
                    try? await gracefulShutdown()  // closed under it: wait for the group's shutdown
                    return
                }
                log.acknowledge(text)
                number += 1
                if number == 50 { ready.yield() }
            }
        }
    }

    /// Runs the group until the writer has 50 acknowledged notes, then shuts it down gracefully.
    func run(databasesFirstInShutdown: Bool) async throws -> (folder: EncryptedFolder, acknowledged: [String], ending: (any Error)?, database: any Database) {
        let folder = try EncryptedFolder()
        let databases = RotationTests.databases(.encryptedSQLite(path: folder.databasePath, keysFile: folder.keysPath,
                                                                 options: OpenOptions(createIfMissing: true, concurrentReaders: 2)))
        let database = databases.database(.sqlite, logger: Logger(label: "lifecycle"), on: databases.eventLoopGroup.any())!
        try await DriverTests.CreateNotes().prepare(on: database)
        let log = WriterLog()
        let (ready, readyContinuation) = AsyncStream<Void>.makeStream()
        let writer = Writer(database: database, log: log, ready: readyContinuation)
        // Graceful shutdown goes from the last service to the first.
        let services: [any Service] = databasesFirstInShutdown
            ? [writer, DatabasesService(databases: databases)]
            : [DatabasesService(databases: databases), writer]
        let group = ServiceGroup(services: services, logger: Logger(label: "lifecycle"))
        async let running: Void = group.run()
        for await _ in ready { break }
        await group.triggerGracefulShutdown()
        try await running
        let (acknowledged, ending) = log.seen
        return (folder, acknowledged, ending, database)
    }

    func testGracefulShutdownStopsTheWriterThenClosesTheDatabase() async throws {
        let (folder, acknowledged, ending, database) = try await run(databasesFirstInShutdown: false)
        XCTAssertNil(ending, "the writer stopped at the shutdown signal, before the database closed")
        XCTAssertGreaterThanOrEqual(acknowledged.count, 50)
        try RotationTests.expectOnly(folder, key: "test-current", notes: acknowledged, refused: ["test-old"])
        await XCTAssertThrowsErrorAsync(try await DriverTests.Note.query(on: database).count()) {
            XCTAssertEqual(($0 as? any DatabaseError)?.isConnectionClosed, true, "\($0)")
        }
    }

    func testDatabasesShutDownUnderAWriterKeepEveryAcknowledgedWrite() async throws {
        let (folder, acknowledged, ending, _) = try await run(databasesFirstInShutdown: true)
        // The writer was still writing when the databases shut down: its next write, and only
        // that, was refused as a closed connection; every acknowledged one committed.
        XCTAssertEqual((ending as? any DatabaseError)?.isConnectionClosed, true, "\(String(describing: ending))")
        XCTAssertGreaterThanOrEqual(acknowledged.count, 50)
        try RotationTests.expectOnly(folder, key: "test-current", notes: acknowledged, refused: ["test-old"])
    }
}
