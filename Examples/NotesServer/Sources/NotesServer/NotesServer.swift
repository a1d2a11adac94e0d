import ArgumentParser
import EncryptedSQLite
import Foundation
import Hummingbird
import Logging
import Metrics
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

        func validate() throws {
            try requireNumber(port, in: 0...65535, "port")
            try requireNumber(readers, in: 0...64, "readers")
            try requireNumber(healthInterval, in: 0...86400, "health-interval")
            try requireNumber(busyTimeout, in: 1...3600, "busy-timeout")
        }

        func run() async throws {
            var options = try database.options()
            (options.host, options.port, options.readers) = (host, port, readers)
            (options.busyTimeout, options.healthInterval) = (busyTimeout, healthInterval)
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
    /// SIGTERM and SIGINT.
    static func serve(_ options: ServerOptions, logger: Logger) async throws {
        // The library's counters, timers and recorders (and Hummingbird's) go to one registry,
        // which `/metrics` prints.
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))

        let database = DatabaseService(path: options.database, keysFile: options.keysFile, readers: options.readers, busyTimeout: .seconds(options.busyTimeout), logger: logger)
        let health = HealthMonitor(interval: .seconds(options.healthInterval))
        var app = Application(
            router: NotesAPI.router(database: database, health: health, registry: registry),
            configuration: ApplicationConfiguration(address: .hostname(options.host, port: options.port), serverName: "notes-server"),
            logger: logger)
        // Started before the server, shut down after it (the group stops services in reverse order).
        app.addServices(database)
        app.beforeServerStarts { _ = try await database.opened() }
        try await app.runService(gracefulShutdownSignals: [.sigterm, .sigint])
        logger.info("stopped")
    }
}
