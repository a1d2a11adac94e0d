import Dispatch
import EncryptedSQLite
import Logging
import ServiceLifecycle
import Synchronization

/// The service's one ``EncryptedDatabase``, as a swift-service-lifecycle `Service`.
///
/// `run()` opens the database from its Keys file — finding the key that opens it, rotating it to
/// the current key if an older one did, applying the migrations — on a thread of its own, not on
/// the cooperative pool (a rotation at start-up can take seconds on a large file). The HTTP server
/// waits for ``opened()`` before it accepts a connection (`Application.beforeServerStarts`), so no
/// request ever meets a database that is not open.
///
/// Then it waits for the service group's graceful shutdown. The group shuts its services down in
/// reverse order: the HTTP server first, which stops accepting and lets in-flight requests finish,
/// then this service, which drops the database: its writer and readers close (the last connection
/// checkpoints the WAL and removes the `-wal` and `-shm` files), and the shutdown is logged with
/// whether every connection was closed.
///
/// Opened from the Keys file, the database follows rotations that `rekey` makes while the service
/// runs: it reads the Keys file again when it meets its file on another key.
final class DatabaseService: Service, Sendable {
    private enum State {
        case starting([CheckedContinuation<EncryptedDatabase, any Error>])
        case open(EncryptedDatabase)
        case failed(any Error)
        case closed
    }

    private let path: String
    private let keysFile: String
    private let readers: Int
    private let busyTimeout: Duration
    private let logger: Logger
    private let state = Mutex<State>(.starting([]))

    /// - Parameters:
    ///   - path: The database file (created, with the schema, when missing).
    ///   - keysFile: The Keys file that lists its keys (a path, or the systemd credential's path).
    ///   - readers: The reader pool's size (`OpenOptions.concurrentReaders`).
    ///   - busyTimeout: How long an operation waits for another process's lock — a rotation by
    ///     `rekey` holds it for the whole rewrite — before it fails (the API answers 503).
    init(path: String, keysFile: String, readers: Int, busyTimeout: Duration, logger: Logger) {
        self.path = path
        self.keysFile = keysFile
        self.readers = readers
        self.busyTimeout = busyTimeout
        self.logger = logger
    }

    func run() async throws {
        try await start()
        // Until the group shuts down gracefully (SIGTERM, SIGINT) or is cancelled.
        try? await gracefulShutdown()
        close()
    }

    /// Opens the database and hands it to those waiting in ``opened()``. (A function of its own, so
    /// that no local reference outlives it: ``close()`` must drop the last one.)
    private func start() async throws {
        let database: EncryptedDatabase
        do {
            database = try await open()
        } catch {
            logger.error("could not open the database", metadata: ["path": "\(path)", "error": "\(error)"])
            resume(with: .failure(error))
            throw error
        }
        let report = database.report
        logger.info("database open", metadata: [
            "path": "\(path)", "key": "\(database.keys.currentID)", "openedWith": "\(report.openedWithKeyID)",
            "rotated": "\(report.rotated)", "created": "\(report.created)", "readers": "\(readers)",
        ])
        resume(with: .success(database))
    }

    /// The open database; waits while it is opening. Throws the open's error when it failed, and
    /// ``Unavailable`` once the service has shut down.
    func opened() async throws -> EncryptedDatabase {
        try await withCheckedThrowingContinuation { continuation in
            let result: Result<EncryptedDatabase, any Error>? = state.withLock { state in
                switch state {
                case .starting(var waiting):
                    waiting.append(continuation)
                    state = .starting(waiting)
                    return nil
                case .open(let database): return .success(database)
                case .failed(let error): return .failure(error)
                case .closed: return .failure(Unavailable())
                }
            }
            if let result { continuation.resume(with: result) }
        }
    }

    /// The open database, for a request: throws ``Unavailable`` while it opens or after shutdown.
    func database() throws -> EncryptedDatabase {
        try state.withLock { state in
            guard case .open(let database) = state else { throw Unavailable() }
            return database
        }
    }

    /// The database is not open (yet, or any more): the API answers 503.
    struct Unavailable: Error, CustomStringConvertible {
        var description: String { "the database is not open" }
    }

    private func open() async throws -> EncryptedDatabase {
        let (path, keysFile, readers, busyTimeout, logger) = (path, keysFile, readers, busyTimeout, logger)
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result {
                    try EncryptedDatabase(
                        path: path, keysFile: keysFile,
                        options: OpenOptions(createIfMissing: true, busyTimeout: busyTimeout, concurrentReaders: readers, logger: logger),
                        migrator: try NotesSchema.migrator())
                })
            }
        }
    }

    private func resume(with result: Result<EncryptedDatabase, any Error>) {
        let waiting = state.withLock { state in
            guard case .starting(let waiting) = state else { return [CheckedContinuation<EncryptedDatabase, any Error>]() }
            switch result {
            case .success(let database): state = .open(database)
            case .failure(let error): state = .failed(error)
            }
            return waiting
        }
        for continuation in waiting { continuation.resume(with: result) }
    }

    /// Drops the service's reference: the database has no `close()`; its connections close when its
    /// last reference goes, which is this one once the HTTP server has finished its requests.
    private func close() {
        weak var closing: EncryptedDatabase?
        state.withLock { state in
            if case .open(let database) = state { closing = database }
            state = .closed
        }
        logger.info("database closed", metadata: ["path": "\(path)", "connectionsClosed": "\(closing == nil)"])
    }
}
