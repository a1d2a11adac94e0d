import ArgumentParser
import EncryptedSQLite
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import Metrics
import NIOCore
import Prometheus
import ServiceLifecycle

/// `notes-server`: the example HTTP service. `serve` runs the JSON API over one encrypted
/// database until SIGTERM or SIGINT; `seed` fills a database with notes up to a size, for load
/// tests of large files. A bad command line exits 64 with the usage; `--help` prints it.
@main
struct NotesServer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notes-server",
        abstract: "The EncryptedSQLite example HTTP service.",
        subcommands: [Serve.self, Seed.self])

    func run() async throws {
        throw ValidationError("name a command: serve or seed")
    }

    /// `notes-server serve`: the JSON API.
    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Serve the JSON API over the database until SIGTERM or SIGINT.")

        @OptionGroup var database: DatabaseArguments
        @Option(help: "The address to listen on.") var host = "127.0.0.1"
        @Option(help: "The port to listen on.") var port = 8080
        @Option(help: "Connections that read in parallel with the writer (0 to 64).") var readers = 4
        @Option(help: ArgumentHelp("How long to wait for a lock, in seconds (1 to 3600).", valueName: "seconds"))
        var busyTimeout = 10
        @Option(help: ArgumentHelp("How long /health keeps its answer, in seconds (0 to 86400).", valueName: "seconds"))
        var healthInterval = 15
        @Option(help: ArgumentHelp("How long a request may take to arrive, head to end of body, in seconds (1 to 3600).", valueName: "seconds"))
        var readTimeout = 10
        @Option(help: ArgumentHelp("How long a connection may send nothing before it is closed, in seconds (1 to 3600).", valueName: "seconds"))
        var idleTimeout = 30
        @Option(help: ArgumentHelp("How long the graceful shutdown may take before what still runs is cancelled, in seconds (1 to 60); the process ends within this plus 5.", valueName: "seconds"))
        var shutdownTimeout = 10

        func validate() throws {
            try requireNumber(port, in: 0...65535, "port")
            try requireNumber(readers, in: 0...64, "readers")
            try requireNumber(healthInterval, in: 0...86400, "health-interval")
            try requireNumber(busyTimeout, in: 1...3600, "busy-timeout")
            try requireNumber(readTimeout, in: 1...3600, "read-timeout")
            try requireNumber(idleTimeout, in: 1...3600, "idle-timeout")
            try requireNumber(shutdownTimeout, in: 1...60, "shutdown-timeout")
        }

        func run() async throws {
            var options = try database.options()
            (options.host, options.port, options.readers) = (host, port, readers)
            (options.busyTimeout, options.healthInterval) = (busyTimeout, healthInterval)
            (options.readTimeout, options.idleTimeout, options.shutdownTimeout) = (readTimeout, idleTimeout, shutdownTimeout)
            try await NotesServer.serve(options, logger: NotesServer.prepare(options))
        }
    }

    /// `notes-server seed`: a database of a given size, for load tests.
    struct Seed: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Fill the database with notes until the file has the given size.")

        @OptionGroup var database: DatabaseArguments
        @Option(name: .customLong("size-mb"), help: ArgumentHelp("The size to reach, in MB (0 to 1000000).", valueName: "n"))
        var sizeMB = 0

        func validate() throws {
            try requireNumber(sizeMB, in: 0...1_000_000, "size-mb")
        }

        func run() async throws {
            var options = try database.options()
            options.sizeMB = sizeMB
            try await Seeder(options: options, logger: NotesServer.prepare(options)).run()
        }
    }

    /// Hardens the process and sets up logging at the options' level.
    static func prepare(_ options: ServerOptions) -> Logger {
        // As `rekey` does: not dumpable, no core files, fatal signals end the process silently.
        _ = ProcessHardening.apply()
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = options.logLevel
            return handler
        }
        return Logger(label: "notes-server")
    }

    /// Runs the HTTP server and the database as services of one group, with graceful shutdown on
    /// SIGTERM and SIGINT, bounded: a request may take `readTimeout` to arrive, a connection may
    /// idle `idleTimeout`, and the shutdown may take `shutdownTimeout`, then what still runs (a
    /// client that reads no answer, a slow query) is cancelled, and after 5 s more the group ends
    /// the process — all well within a unit's `TimeoutStopSec=30`.
    static func serve(_ options: ServerOptions, logger: Logger) async throws {
        // The library's counters, timers and recorders (and Hummingbird's) go to one registry,
        // which `/metrics` prints.
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))

        let database = DatabaseService(path: options.database, keysFile: options.keysFile, readers: options.readers, busyTimeout: .seconds(options.busyTimeout), logger: logger)
        let health = HealthMonitor(interval: .seconds(options.healthInterval))
        let readTimeout = TimeAmount.seconds(Int64(options.readTimeout))
        var app = Application(
            router: NotesAPI.router(database: database, health: health, registry: registry),
            server: .http1(configuration: HTTP1Channel.Configuration(
                additionalChannelHandlers: [RequestReadTimeout(timeout: readTimeout, logger: logger)],
                idleTimeout: .seconds(Int64(options.idleTimeout)))),
            configuration: ApplicationConfiguration(address: .hostname(options.host, port: options.port), serverName: "notes-server"),
            logger: logger)
        // Started before the server, shut down after it (the group stops services in reverse order).
        app.addServices(database)
        app.beforeServerStarts { _ = try await database.opened() }
        // `app.runService` without its defaults: a graceful shutdown that may not outlast its bound.
        var group = ServiceGroupConfiguration(services: [app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        group.maximumGracefulShutdownDuration = .seconds(options.shutdownTimeout)
        group.maximumCancellationDuration = .seconds(5)
        try await ServiceGroup(configuration: group).run()
        logger.info("stopped")
    }
}
