/// Finds the key that opens a file: one fresh connection per attempt, current key first, then
/// the older keys from oldest to newest. A key opens the file only when a read of the schema
/// succeeds with it.
struct KeyProbe {
    struct Outcome {
        let connection: Connection
        let key: ResolvedKey
        let attempts: [OpenReport.KeyAttempt]
    }

    let keys: KeyList
    let trial: KeyTrial

    var path: String { trial.path }

    /// Looks at the file first (so that a missing, empty or plaintext file costs no key
    /// derivation), then tries the keys.
    func run() throws(EncryptedDatabaseError) -> Outcome {
        try Self.requireEncryptedCandidate(path: path)
        var attempts: [OpenReport.KeyAttempt] = []
        for key in keys.trialOrder {
            let stopwatch = Stopwatch()
            if let connection = try trial.open(with: key) {
                attempts.append(.init(keyID: key.id, opened: true, duration: stopwatch.elapsed))
                return Outcome(connection: connection, key: key, attempts: attempts)
            }
            attempts.append(.init(keyID: key.id, opened: false, duration: stopwatch.elapsed))
        }
        throw .noKeyOpens(path: path, triedKeyIDs: attempts.map(\.keyID))
    }

    /// Throws the matching error unless the file could be an encrypted database.
    static func requireEncryptedCandidate(path: String) throws(EncryptedDatabaseError) {
        switch DatabaseFileKind.inspect(path: path) {
        case .missing: throw .fileNotFound(path: path)
        case .notARegularFile(let kind): throw .notARegularFile(path: path, kind: kind)
        case .unreadable(let reason): throw .permissionDenied(path: path, reason: reason)
        case .empty: throw .emptyFile(path: path)
        case .tooShort(let bytes): throw .fileTooShort(path: path, bytes: bytes)
        case .plaintextSQLite: throw .plaintextDatabase(path: path)
        case .opaque: return
        }
    }
}

/// One attempt to open a file with one key, on a fresh connection.
struct KeyTrial {
    let path: String
    let access: Connection.AccessMode
    let busyTimeout: Duration

    /// The connection when `key` opens the file (a schema read succeeds), `nil` when SQLite says
    /// the key is wrong. Other failures (busy, I/O, permissions) are thrown: they say nothing
    /// about the key.
    func open(with key: ResolvedKey) throws(EncryptedDatabaseError) -> Connection? {
        do {
            let connection = try Connection(path: path, access: access, key: key.material, busyTimeout: busyTimeout)
            try connection.verifyReadable()
            return connection
        } catch let error as SQLiteError where error.code.primary == .notADatabase {
            return nil
        } catch let error as SQLiteError {
            throw EncryptedDatabaseError.from(error, path: path, operation: "opening with key \"\(key.id)\"")
        } catch {
            throw .ioFailure(path: path, operation: "opening with key \"\(key.id)\"", detail: "\(error)")
        }
    }
}
