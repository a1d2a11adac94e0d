import KeyConfiguration
import SQLCipherConnection

extension ReaderPool {
    // MARK: Opening the pool of a database

    /// The pool for a database whose writer is `writer`, on `key`: switches the file to WAL mode
    /// (unless read-only); `nil` without ``OpenOptions/concurrentReaders`` or when the file cannot be
    /// in WAL mode (logged).
    /// - Throws: ``EncryptedDatabaseError/ioFailure(path:operation:detail:)`` when the journal mode cannot be read or set.
    static func open(writer: Connection, key: ResolvedKey, path: String, options: OpenOptions, setup: ConnectionSetup) throws(EncryptedDatabaseError) -> ReaderPool? {
        guard options.concurrentReaders > 0 else { return nil }
        do {
            var mode = try writer.journalMode()
            if mode != "wal" && !options.readOnly {
                mode = (try writer.queryValue("PRAGMA journal_mode = WAL", as: String.self) ?? "").lowercased()
            }
            guard mode == "wal" else {
                options.logger.warning("no reader pool: the database is not in WAL mode", metadata: ["path": "\(path)"])
                return nil
            }
        } catch {
            throw .ioFailure(path: path, operation: "switching to WAL mode for concurrent readers", detail: "\(error)")
        }
        return ReaderPool(
            path: path, capacity: options.concurrentReaders, key: Self.key(for: key, path: path, options: options), busyTimeout: options.busyTimeout,
            setup: { try setup.run(on: $0) })
    }

    /// The key for reader connections: the raw key plus salt the probe derived (no further key
    /// derivation), with the key's cipher settings, checked to open the file; else the key
    /// itself, which then costs a key derivation per reader (logged).
    static func key(for key: ResolvedKey, path: String, options: OpenOptions) -> ResolvedKey {
        let (readerKey, derivesPerConnection) = KeyedConnections(path: path, access: .readOnly, busyTimeout: options.busyTimeout).connectionKey(for: key)
        if derivesPerConnection {
            options.logger.warning("reader connections will each derive the key: no derived key could be checked", metadata: ["path": "\(path)", "key": "\(key.id)"])
        }
        return readerKey
    }
}
