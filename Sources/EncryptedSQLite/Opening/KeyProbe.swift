import SQLCipherConnection
import CipherFormats
import KeyConfiguration

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
    /// derivation), then tries the keys. An unencrypted file opens with the list's plaintext
    /// entry, when it has one. When no key opens the file, checks whether it is a SQLCipher 4 file
    /// one of the keys is right for (``SQLCipher4Diagnosis``).
    ///
    /// The returned key carries the cipher settings that opened the file (for a legacy key, the
    /// variant that matched).
    func run() throws(EncryptedDatabaseError) -> Outcome {
        if case .plaintextSQLite = DatabaseFileKind.inspect(path: path), let plaintext = keys.plaintextKey {
            let stopwatch = Stopwatch()
            if let (connection, key) = try trial.find(plaintext) {
                return Outcome(connection: connection, key: key, attempts: [.init(keyID: key.id, opened: true, duration: stopwatch.elapsed)])
            }
            throw .noKeyOpens(path: path, triedKeyIDs: [plaintext.id])
        }
        try Self.requireEncryptedCandidate(path: path)
        var attempts: [OpenReport.KeyAttempt] = []
        for key in keys.trialOrder {
            let stopwatch = Stopwatch()
            if let (connection, opened) = try trial.find(key) {
                attempts.append(.init(keyID: key.id, opened: true, duration: stopwatch.elapsed))
                return Outcome(connection: connection, key: opened, attempts: attempts)
            }
            attempts.append(.init(keyID: key.id, opened: false, duration: stopwatch.elapsed))
        }
        let tried = attempts.map(\.keyID)
        if let keyID = SQLCipher4Diagnosis(path: path).matchingKeyID(among: keys.trialOrder.map { ($0.id, $0.material) }) {
            throw .sqlcipher4File(path: path, keyID: keyID, triedKeyIDs: tried)
        }
        throw .noKeyOpens(path: path, triedKeyIDs: tried)
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
        try find(key)?.connection
    }

    /// Like ``open(with:)``, trying each of the key's settings (two for a legacy key); also
    /// returns the key with the settings that opened the file.
    func find(_ key: ResolvedKey) throws(EncryptedDatabaseError) -> (connection: Connection, key: ResolvedKey)? {
        for settings in key.settingsToTry {
            let keying = keyingMaterial(for: key, settings: settings)
            if let connection = try attempt(key, keying.material, settings) {
                return (connection, ResolvedKey(id: key.id, material: key.material, cipher: settings, legacy: key.legacy))
            }
            // A derived key goes with the salt it was derived for: if the file changed under us
            // (replaced by a rotation elsewhere), derive again rather than call the key wrong.
            if let salt = keying.salt, let fresh = DerivedKey.salt(ofFileAt: path), fresh != salt,
               let connection = try attempt(key, keyingMaterial(for: key, settings: settings).material, settings) {
                return (connection, ResolvedKey(id: key.id, material: key.material, cipher: settings, legacy: key.legacy))
            }
        }
        return nil
    }

    /// What to key the connection with: for a key of the current (3.x) format, the raw key plus
    /// salt derived once per material and file, so that the derivation is paid once per process
    /// (probe, verification and reader connections share it); else the material itself.
    func keyingMaterial(for key: ResolvedKey, settings: CipherSettings) -> (material: KeyMaterial?, salt: [UInt8]?) {
        guard let material = key.material, !key.legacy, let salt = DerivedKey.salt(ofFileAt: path),
              let iterations = settings.effective.kdfIterations,
              let derived = material.derived(forSalt: salt, iterations: iterations)
        else { return (key.material, nil) }
        return (derived, salt)
    }

    private func attempt(_ key: ResolvedKey, _ material: KeyMaterial?, _ settings: CipherSettings) throws(EncryptedDatabaseError) -> Connection? {
        do {
            let connection = try Connection(path: path, access: access, key: material, cipher: settings, busyTimeout: busyTimeout)
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
