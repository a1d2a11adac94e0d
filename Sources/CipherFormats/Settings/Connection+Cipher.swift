import Foundation
import SQLCipherConnection

extension Connection {
    /// Opens `path` keyed with `key`, its material and the settings of the file it opens, or
    /// unkeyed when `key` is `nil`: the one way the library opens a keyed connection. The settings
    /// run right after the key, before anything is read; the process-wide `cipher_default_*`
    /// pragmas are never used.
    /// - Throws: ``SQLiteError`` when SQLite cannot open the file or refuses a setting.
    ///
    /// SQLCipher keeps the HMAC salt mask (`cipher_hmac_salt_mask`, 0x00 in SQLCipher 2.0 beta
    /// files) for the whole process, not per connection. Settings with another mask than the
    /// default are applied under a process-wide lock, the keys are derived at once (one read of
    /// the schema; its failure is left for the caller's own read to report), and the default mask
    /// is put back before the lock is released.
    package convenience init(path: String, access: AccessMode, create: Bool = false, key: CipherKey?, busyTimeout: Duration) throws {
        guard let key, let mask = key.settings.hmacSaltMask, mask != CipherFormat.defaultHMACSaltMask else {
            try self.init(path: path, access: access, create: create, sqlcipherKey: key, busyTimeout: busyTimeout)
            return
        }
        SQLCipherEngine.processWideSettings.lock()
        defer {
            SQLCipherEngine.restoreDefaultHMACSaltMask()
            SQLCipherEngine.processWideSettings.unlock()
        }
        try self.init(path: path, access: access, create: create, sqlcipherKey: key, busyTimeout: busyTimeout)
        _ = try? queryValue("SELECT count(*) FROM sqlite_master", as: Int.self)
    }

    /// Attaches `path` as `schema`, keyed with `key` (unencrypted when `nil`) and written with its
    /// settings. The key is bound as a parameter of `ATTACH … KEY ?`, never put in SQL text, and
    /// is always given explicitly (an ATTACH without KEY may inherit the main key or write plaintext).
    package func attach(path: String, as schema: String, key: CipherKey?) throws {
        try attachDatabase(path: path, as: schema, key: key)
        guard let key else { return }
        // A new file is written through an attached database: never with a process-wide HMAC salt
        // mask of its own (the key list refuses such a current key).
        precondition(key.settings.hmacSaltMask.map { $0 == CipherFormat.defaultHMACSaltMask } ?? true, "an attached database with another HMAC salt mask")
        for statement in key.keySetup(schema: schema) { try execute(statement) }
    }

    /// Detaches a schema attached with ``attach(path:as:key:)``.
    package func detach(_ schema: String) throws {
        try execute("DETACH DATABASE \(schema)")
    }
}
