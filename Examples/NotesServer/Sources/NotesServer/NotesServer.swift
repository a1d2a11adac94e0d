import EncryptedSQLite
import Foundation
import Hummingbird
import Logging
import Metrics
import Prometheus
import ServiceLifecycle

/// `notes-server`: the example HTTP service. `serve` runs the JSON API over one encrypted
/// database until SIGTERM or SIGINT; `seed` fills a database with notes up to a size, for load
/// tests of large files.
@main
enum NotesServer {
    static func main() async throws {
        let options: ServerOptions
        do {
            options = try ServerOptions(arguments: Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment)
        } catch {
            FileHandle.standardError.write(Data("notes-server: \(error)\n\(ServerOptions.usage)\n".utf8))
            exit(64)
        }
        // As `rekey` does: not dumpable, no core files, fatal signals end the process silently.
        _ = ProcessHardening.apply()
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = options.logLevel
            return handler
        }
        let logger = Logger(label: "notes-server")
        switch options.command {
        case .serve: try await serve(options, logger: logger)
        case .seed: try await Seeder(options: options, logger: logger).run()
        }
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
            router: NotesAPI.router(database: database, health: health, registry: registry, logger: logger),
            configuration: ApplicationConfiguration(address: .hostname(options.host, port: options.port), serverName: "notes-server"),
            logger: logger)
        // Started before the server, shut down after it (the group stops services in reverse order).
        app.addServices(database)
        app.beforeServerStarts { _ = try await database.opened() }
        try await app.runService(gracefulShutdownSignals: [.sigterm, .sigint])
        logger.info("stopped")
    }
}
