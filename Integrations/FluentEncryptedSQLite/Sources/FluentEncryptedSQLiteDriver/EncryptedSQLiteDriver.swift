import EncryptedSQLite
import FluentKit
import Foundation
import Logging
import NIOCore

extension DatabaseConfigurationFactory {
    /// A Fluent database on an encrypted SQLite file whose keys come from a Keys file: opening
    /// rotates the file to the current key (see `EncryptedDatabase(path:keysFile:options:)`), and
    /// every key source of the Keys file works (hex, passphrase, `env:`, `file:`, `credential:`,
    /// wrapped keys).
    ///
    /// ```swift
    /// app.databases.use(.encryptedSQLite(path: "app.sqlite", keysFile: "Keys",
    ///                                    options: OpenOptions(createIfMissing: true, concurrentReaders: 4)), as: .sqlite)
    /// ```
    ///
    /// The file opens when Fluent first asks for the driver; when it cannot be opened, every
    /// query fails with the opening's `EncryptedDatabaseError`. Shutting Fluent's databases down
    /// closes it (`close()`).
    /// - Parameters:
    ///   - sqlLogLevel: the level queries are logged at (SQL text only, never bound values).
    ///   - jsonEncoder, jsonDecoder: how nested `Codable` values are stored as JSON text.
    public static func encryptedSQLite(
        path: String,
        keysFile: String,
        options: OpenOptions = OpenOptions(),
        sqlLogLevel: Logger.Level? = .debug,
        jsonEncoder: JSONEncoder = JSONEncoder(),
        jsonDecoder: JSONDecoder = JSONDecoder()
    ) -> Self {
        make(open: { try EncryptedDatabase(path: path, keysFile: keysFile, options: options) },
             sqlLogLevel: sqlLogLevel, jsonEncoder: jsonEncoder, jsonDecoder: jsonDecoder)
    }

    /// A Fluent database on an encrypted SQLite file opened with `keys` (oldest first, the last
    /// is current): as ``encryptedSQLite(path:keysFile:options:sqlLogLevel:jsonEncoder:jsonDecoder:)``.
    ///
    /// ```swift
    /// let keys = try KeysFile.load(path: "Keys").keyList(forDatabase: "app.sqlite")
    /// app.databases.use(.encryptedSQLite(path: "app.sqlite", keys: keys), as: .sqlite)
    /// ```
    public static func encryptedSQLite(
        path: String,
        keys: KeyList,
        options: OpenOptions = OpenOptions(),
        sqlLogLevel: Logger.Level? = .debug,
        jsonEncoder: JSONEncoder = JSONEncoder(),
        jsonDecoder: JSONDecoder = JSONDecoder()
    ) -> Self {
        make(open: { try EncryptedDatabase(path: path, keys: keys, options: options) },
             sqlLogLevel: sqlLogLevel, jsonEncoder: jsonEncoder, jsonDecoder: jsonDecoder)
    }

    /// A Fluent database on a database the app opened itself (to handle the opening's errors,
    /// share it with non-Fluent code, or start a background rotation). Shutting Fluent's
    /// databases down closes it.
    ///
    /// ```swift
    /// let database = try EncryptedDatabase(path: "app.sqlite", keysFile: "Keys")
    /// app.databases.use(.encryptedSQLite(database: database), as: .sqlite)
    /// ```
    public static func encryptedSQLite(
        database: EncryptedDatabase,
        sqlLogLevel: Logger.Level? = .debug,
        jsonEncoder: JSONEncoder = JSONEncoder(),
        jsonDecoder: JSONDecoder = JSONDecoder()
    ) -> Self {
        make(open: { database }, sqlLogLevel: sqlLogLevel, jsonEncoder: jsonEncoder, jsonDecoder: jsonDecoder)
    }

    private static func make(open: @escaping @Sendable () throws -> EncryptedDatabase, sqlLogLevel: Logger.Level?,
                             jsonEncoder: JSONEncoder, jsonDecoder: JSONDecoder) -> Self {
        let (encoder, decoder) = (ValueEncoder(json: jsonEncoder), ValueDecoder(json: jsonDecoder))
        return .init {
            EncryptedSQLiteConfiguration(open: open, encoder: encoder, decoder: decoder, sqlLogLevel: sqlLogLevel)
        }
    }
}

/// How Fluent makes the driver: opens the database once, when Fluent first asks for it.
struct EncryptedSQLiteConfiguration: DatabaseConfiguration {
    let open: @Sendable () throws -> EncryptedDatabase
    let encoder: ValueEncoder
    let decoder: ValueDecoder
    let sqlLogLevel: Logger.Level?
    var middleware: [any AnyModelMiddleware] = []

    func makeDriver(for databases: Databases) -> any DatabaseDriver {
        EncryptedSQLiteDriver(opened: Result { try open() }, encoder: encoder, decoder: decoder, sqlLogLevel: sqlLogLevel)
    }
}

/// The driver: one ``EncryptedSQLite/EncryptedDatabase`` (its writer and reader pool are the
/// connection pool), a Fluent database per request context over it.
struct EncryptedSQLiteDriver: DatabaseDriver {
    let opened: Result<EncryptedDatabase, any Error>
    let encoder: ValueEncoder
    let decoder: ValueDecoder
    let sqlLogLevel: Logger.Level?

    func makeDatabase(with context: DatabaseContext) -> any Database {
        FluentEncryptedSQLiteDatabase(
            sql: EncryptedSQLDatabase(opened: opened, session: nil, encoder: encoder, decoder: decoder,
                                      logger: context.logger, eventLoop: context.eventLoop, queryLogLevel: sqlLogLevel),
            context: context)
    }

    func shutdown() {
        if case .success(let database) = opened { database.close() }
    }

    func shutdownAsync() async {
        if case .success(let database) = opened { await database.close() }
    }
}

extension DatabaseID {
    /// `sqlite`: the identifier Vapor apps give their SQLite database (fluent-sqlite-driver
    /// declares the same one; an app uses one driver or the other, never both).
    ///
    /// ```swift
    /// app.databases.use(.encryptedSQLite(path: "app.sqlite", keysFile: "Keys"), as: .sqlite)
    /// let db = app.db(.sqlite)
    /// ```
    public static var sqlite: DatabaseID { .init(string: "sqlite") }
}
