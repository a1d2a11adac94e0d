import SQLCipherConnection

/// What each connection the application's code runs on gets when it opens — the writer, and every
/// pooled reader — and again when it reopens after a rotation: foreign-key enforcement as
/// ``OpenOptions/foreignKeys`` says, then ``OpenOptions/prepareConnection``. The connections of
/// the key probe, the rotation and its verification never run it.
struct ConnectionSetup: Sendable {
    let foreignKeys: Bool
    let prepareConnection: (@Sendable (Connection) throws -> Void)?

    init(options: OpenOptions) {
        foreignKeys = options.foreignKeys
        prepareConnection = options.prepareConnection
    }

    /// Sets up `connection`.
    /// - Throws: `SQLiteError` from the pragma, or whatever `prepareConnection` throws.
    func run(on connection: Connection) throws {
        try connection.execute(foreignKeys ? "PRAGMA foreign_keys = ON" : "PRAGMA foreign_keys = OFF")
        try prepareConnection?(connection)
    }

    /// Sets up the writer, as an ``EncryptedDatabaseError`` naming the step.
    func runOnWriter(_ connection: Connection, path: String) throws(EncryptedDatabaseError) {
        do {
            try run(on: connection)
        } catch {
            throw .from(error, path: path, operation: "setting up the connection (foreign keys, OpenOptions.prepareConnection)")
        }
    }
}
