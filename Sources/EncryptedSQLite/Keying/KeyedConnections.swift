import CipherFormats
import KeyConfiguration
import SQLCipherConnection

/// One attempt to open a file with one key, on a fresh connection: the one place that turns a
/// ``ResolvedKey`` into a keyed connection.
///
/// Every keyed connection of the library opens here (``open(with:)``, ``connect(_:create:)``): the
/// probe's trials, the writer, pooled readers, the export's and backup's connections, creation.
/// Each is keyed with the key's material and its cipher settings together (`CipherKey`); there
/// is no way to key a handle with the bytes alone.
struct KeyedConnections {
    let path: String
    let access: Connection.AccessMode
    let busyTimeout: Duration
    /// Sets `PRAGMA query_only` on the connection, so that a read-write connection writes nothing
    /// (see ``forInspection(path:busyTimeout:)``).
    var queryOnly = false

    /// The connection when `key` opens the file (a schema read succeeds), `nil` when SQLite says
    /// the key is wrong. Other failures (busy, I/O, permissions) are thrown: they say nothing
    /// about the key.
    func open(with key: ResolvedKey) throws(EncryptedDatabaseError) -> Connection? {
        try find(key)?.connection
    }

    /// Like ``open(with:)``, trying each of the key's settings in turn (`formats`, or the key's
    /// ``ResolvedKey/settingsToTry``); also returns the key with the settings that opened the file.
    /// A `legacy` key without settings then tries the SQLCipher 2.0 beta format, but only when
    /// the library's page layer finds page 1 written in it with that key
    /// (`SQLCipherEngine.isBeta20File(at:material:)`): that format changes a process-wide setting
    /// while its connection derives its keys.
    func find(_ key: ResolvedKey, formats: [CipherSettings]? = nil) throws(EncryptedDatabaseError) -> (connection: Connection, key: ResolvedKey)? {
        if let found = try find(key, in: formats ?? key.settingsToTry) { return found }
        guard key.legacy, key.cipher.isEngineDefault, let material = key.material,
              SQLCipherEngine.isBeta20File(at: path, material: material),
              let connection = try attempt(key.with(SQLCipherEngine.beta20))
        else { return nil }
        return (connection, key.with(SQLCipherEngine.beta20))
    }

    private func find(_ key: ResolvedKey, in formats: [CipherSettings]) throws(EncryptedDatabaseError) -> (connection: Connection, key: ResolvedKey)? {
        for settings in formats {
            let keying = keyed(key.with(settings))
            if let connection = try attempt(keying.key) {
                return (connection, key.with(settings))
            }
            // A derived key goes with the salt it was derived for: if the file changed under us
            // (replaced by a rotation elsewhere), derive again rather than call the key wrong.
            if let salt = keying.salt, let fresh = DerivedKey.salt(ofFileAt: path), fresh != salt,
               let connection = try attempt(keyed(key.with(settings)).key) {
                return (connection, key.with(settings))
            }
        }
        return nil
    }

    /// What to key the connection with: for a passphrase that is not legacy, the raw key plus
    /// salt derived with the file format's KDF once per material and file, so that the derivation
    /// is paid once per process (probe, verification and reader connections share it), with the
    /// key's settings; else the key itself (also when page 1 holds a plaintext header instead of
    /// the salt). A raw key is the key itself: SQLCipher reads the salt from the file as it would
    /// for the raw key plus salt, and derives nothing else from it that a process could keep, so
    /// page 1 is not read here for it (an open with a raw key reads the file's first bytes once,
    /// through its own connection: ``KeyProbe``).
    func keyed(_ key: ResolvedKey) -> (key: ResolvedKey, salt: [UInt8]?) {
        guard let material = key.material, material.kind == .passphrase, !key.legacy, let salt = DerivedKey.salt(ofFileAt: path),
              let format = PageFormat(settings: key.cipher), format.plaintextHeaderSize == 0,
              let derived = material.derived(forSalt: salt, derivation: format.keyDerivation)
        else { return (key, nil) }
        return (key.with(derived), salt)
    }

    /// The key for connections opened after the probe (the reader pool's): the raw key plus salt
    /// the probe derived, with the key's settings, when it opens the file; else the key itself,
    /// which then costs a key derivation per connection (`derivesPerConnection` says so).
    func connectionKey(for key: ResolvedKey) -> (key: ResolvedKey, derivesPerConnection: Bool) {
        let keying = keyed(key)
        guard keying.salt != nil, let connection = try? open(with: keying.key) else {
            return (key, key.material?.kind == .passphrase)
        }
        connection.close()
        return (keying.key, false)
    }

    /// A connection on the file keyed with `key` exactly as given, not checked against the file:
    /// for a file being created (`create`), or one the caller verifies itself.
    /// - Throws: ``SQLiteError`` when SQLite cannot open the file or refuses a setting.
    func connect(_ key: ResolvedKey, create: Bool = false) throws -> Connection {
        let connection = try Connection(path: path, access: access, create: create, key: key.cipherKey, busyTimeout: busyTimeout)
        if queryOnly { try connection.execute("PRAGMA query_only = 1") }
        return connection
    }

    private func attempt(_ key: ResolvedKey) throws(EncryptedDatabaseError) -> Connection? {
        do {
            return try verified(try connect(key), key: key)
        } catch let error as EncryptedDatabaseError {
            throw error
        } catch let error as SQLiteError where error.code.primary == .notADatabase {
            return nil
        } catch let error as SQLiteError {
            throw EncryptedDatabaseError.from(error, path: path, operation: "opening with key \"\(key.id)\"")
        } catch {
            throw .ioFailure(path: path, operation: "opening with key \"\(key.id)\"", detail: "\(error)")
        }
    }

    /// `connection` (opened by ``connect(_:create:)`` with `key`, nothing read yet) when a read
    /// of the schema succeeds on it, `nil` when SQLite says the key is wrong (the connection is
    /// closed); other failures are thrown, as ``open(with:)`` throws them.
    func verified(_ connection: Connection, key: ResolvedKey) throws(EncryptedDatabaseError) -> Connection? {
        do {
            try connection.verifyReadable()
            return connection
        } catch let error as SQLiteError where error.code.primary == .notADatabase {
            connection.close()
            return nil
        } catch let error as SQLiteError {
            connection.close()
            throw EncryptedDatabaseError.from(error, path: path, operation: "opening with key \"\(key.id)\"")
        } catch {
            connection.close()
            throw .ioFailure(path: path, operation: "opening with key \"\(key.id)\"", detail: "\(error)")
        }
    }
}
