import DatabaseMigrations
import KeyConfiguration

extension EncryptedDatabase {
    // MARK: Opening

    /// Opens (and, unless disabled, rotates, then migrates) the database at `path`.
    ///
    /// One call does it all on the same keyed connection: find the key, rotate the file to the
    /// current key, and apply `migrator`'s pending migrations.
    ///
    /// The list is given once: when another process rotates the file to a key it lacks, this
    /// process cannot follow (``EncryptedDatabaseError/keyUnavailable(path:reason:)``). A process
    /// that must keep running through rotations made elsewhere opens with
    /// ``init(path:keysFile:options:migrator:)`` or ``init(path:keyProvider:options:migrator:)``.
    ///
    /// - Parameters:
    ///   - path: The database file.
    ///   - keys: Its keys, oldest first; the last is the current key.
    ///   - options: Creation, read-only, rotation, busy timeout, verification, reader pool, logging.
    ///   - migrator: Migrations to apply after opening; their identifiers are in
    ///     ``appliedMigrations``.
    /// - Throws: ``EncryptedDatabaseError``: the file is missing, empty, too short, plaintext, not
    ///   opened by any key, busy, read-only, the rotation failed (a failed open leaves the file
    ///   byte-identical), or ``EncryptedDatabaseError/migrationFailed(path:_:)``.
    public convenience init(path: String, keys: KeyList, options: OpenOptions = OpenOptions(), migrator: DatabaseMigrator? = nil) throws(EncryptedDatabaseError) {
        try self.init(path: path, source: .fixed(keys), options: options, migrator: migrator)
    }

    /// Opens the database at `path` with the keys its entry in the Keys file lists, and reads the
    /// Keys file again whenever it finds the file rotated by another process, so a running process
    /// follows rotations made by `rekey` or by other processes without a restart.
    ///
    /// ```swift
    /// let database = try EncryptedDatabase(path: "/srv/app/app.sqlite", keysFile: "/srv/app/Keys",
    ///                                      options: OpenOptions(concurrentReaders: 4))
    /// ```
    ///
    /// Keep the keys in key files (`file:`) or inline: an environment variable set after the
    /// process started is invisible to it (<doc:KeyRotation>).
    /// - Parameters:
    ///   - path: The database file; its entry is found as `KeysFile.keyList(forDatabase:)` finds it.
    ///   - keysFile: The Keys file.
    ///   - options, migrator: As for ``init(path:keys:options:migrator:)``.
    /// - Throws: ``EncryptedDatabaseError/keyUnavailable(path:reason:)`` when the Keys file cannot be
    ///   read or does not list `path`; otherwise as ``init(path:keys:options:migrator:)``.
    public convenience init(path: String, keysFile: String, options: OpenOptions = OpenOptions(), migrator: DatabaseMigrator? = nil) throws(EncryptedDatabaseError) {
        try self.init(path: path, source: .keysFile(keysFile, database: path), options: options, migrator: migrator)
    }

    /// Opens the database at `path` with the key list `keyProvider` returns, and calls it again
    /// whenever the database finds its file rotated by another process, so a running process
    /// follows rotations made elsewhere without a restart. For keys that live elsewhere (a secrets
    /// service, a keychain).
    ///
    /// ```swift
    /// let database = try EncryptedDatabase(path: "app.sqlite", keyProvider: {
    ///     try KeyList(database: "app.sqlite", keys: try secrets.databaseKeys())
    /// })
    /// ```
    ///
    /// `keyProvider` runs on whichever thread met the rotation, with no lock of the database held
    /// by the caller's code; it must not use this database.
    /// - Parameters:
    ///   - path: The database file.
    ///   - keyProvider: Returns the keys, oldest first; the last is the current key.
    ///   - options, migrator: As for ``init(path:keys:options:migrator:)``.
    /// - Throws: ``EncryptedDatabaseError/keyUnavailable(path:reason:)`` when `keyProvider` throws;
    ///   otherwise as ``init(path:keys:options:migrator:)``.
    public convenience init(path: String, keyProvider: @escaping @Sendable () throws -> KeyList, options: OpenOptions = OpenOptions(), migrator: DatabaseMigrator? = nil) throws(EncryptedDatabaseError) {
        try self.init(path: path, source: .provider(keyProvider), options: options, migrator: migrator)
    }
}
