import Logging
import Vapor

/// `vapor-todos serve --hostname 127.0.0.1 --port 8080`: Vapor's own command line. The database
/// and its Keys file come from `DATABASE_PATH` and `KEYS_FILE` (see configure.swift).
@main
enum Entrypoint {
    static func main() async throws {
        var environment = try Environment.detect()
        try LoggingSystem.bootstrap(from: &environment)
        let app = try await Application.make(environment)
        do {
            try await configure(app)
            try await app.execute()
        } catch {
            app.logger.report(error: error)
            try? await app.asyncShutdown()
            throw error
        }
        // Shutdown closes the database (the driver's shutdown): queued writes commit first.
        try await app.asyncShutdown()
    }
}
