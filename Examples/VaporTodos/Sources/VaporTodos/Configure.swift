import EncryptedSQLite
import Fluent
import FluentEncryptedSQLiteDriver
import Vapor

/// The app: an encrypted database opened from a Keys file (an older key rotates the file to the
/// current one at the open; `rekey` may rotate it while the app runs), Fluent's migrations, the
/// routes, and errors that never show SQL or a path.
func configure(_ app: Application) async throws {
    let path = Environment.get("DATABASE_PATH") ?? "todos.sqlite"
    let keysFile = Environment.get("KEYS_FILE") ?? "Keys"
    var options = OpenOptions(createIfMissing: true, concurrentReaders: 4)
    // A request waits at most this long for the writer (a rotation holds it for its swap), then
    // gets 503 instead of hanging; nothing was written then.
    options.writerWaitLimit = .seconds(10)
    options.busyTimeout = .seconds(10)
    app.databases.use(.encryptedSQLite(path: path, keysFile: keysFile, options: options, sqlLogLevel: nil), as: .sqlite)
    app.migrations.add(CreateProject(), CreateTodo())
    try await app.autoMigrate()

    app.middleware = Middlewares()
    app.middleware.use(APIErrorMiddleware())
    app.routes.defaultMaxBodySize = "16kb"
    try app.register(collection: TodoRoutes())
}
