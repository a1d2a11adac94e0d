import CipherFormats
import DurableFiles
import Foundation
import KeyConfiguration
import SQLCipherConnection

/// What a health endpoint reports about one encrypted database: which key and format it is on,
/// whether it needs rotation, the age of its current key against its policy, its journal mode and
/// size, and a cheap integrity check of its pages. Holds no key material.
///
/// ```swift
/// let health = try DatabaseHealth.check(path: "app.sqlite", keys: keys, maximumKeyAgeDays: 365)
/// if health.needsRotation || health.keyTooOld || health.integrity != .ok { alert(health) }
/// ```
public struct DatabaseHealth: Sendable, Equatable, Codable {
    /// The result of the page check.
    public enum Integrity: String, Sendable, Codable {
        /// Every page's HMAC checks out.
        case ok
        /// A page does not authenticate: see ``DatabaseHealth/integrityDetail``.
        case failed
        /// Not checked: the file has no page HMACs (plaintext, or `use_hmac` off).
        case notChecked
    }

    /// The database path.
    public let path: String
    /// The id of the key that opens the file.
    public let keyID: String
    /// The id of the current key.
    public let currentKeyID: String
    /// `true` when the file is not on the current key.
    public let needsRotation: Bool
    /// The file's format: `plaintext`, `legacy`, or `sqlcipher3` with its page size, KDF
    /// iterations and HMAC, such as `kdf_iter 256000 (sha512), page_size 4096, hmac sha512` (as `rekey status` prints it).
    public let format: String
    /// The journal mode (`delete`, `wal`, …).
    public let journalMode: String
    /// The database file's size in bytes.
    public let bytes: Int64
    /// The `-wal` file's size in bytes (0 when there is none).
    public let walBytes: Int64
    /// The page check's result.
    public let integrity: Integrity
    /// The first problem the page check found, or `nil`.
    public let integrityDetail: String?
    /// How the pages were checked: `page HMACs` (the library's page layer, 3.x format) or
    /// `cipher_integrity_check` (SQLCipher 4).
    public let integrityMethod: String
    /// The current key's `created:` day, when the key list has it.
    public let currentKeyCreated: String?
    /// Whole days since the current key was created, when known.
    public let currentKeyAgeDays: Int?
    /// The policy's maximum age in days, when one applies.
    public let maximumKeyAgeDays: Int?

    /// `true` when the current key is older than the policy allows: time to make a new key.
    public var keyTooOld: Bool {
        guard let age = currentKeyAgeDays, let maximum = maximumKeyAgeDays else { return false }
        return age > maximum
    }

    /// Checks one database, read-only (opened as ``DatabaseInspection`` does, never rotated).
    /// - Parameters:
    ///   - maximumKeyAgeDays: The policy for the current key's age (the Keys file's
    ///     `max_key_age_days`), or `nil` for none.
    ///   - now: The time key ages are measured at.
    /// - Throws: ``EncryptedDatabaseError`` as for opening (missing, no key opens it, busy, …).
    public static func check(path: String, keys: KeyList, maximumKeyAgeDays: Int? = nil, now: Date = Date(), busyTimeout: Duration = .seconds(5)) throws(EncryptedDatabaseError) -> DatabaseHealth {
        let outcome = try KeyProbe(keys: keys, trial: KeyedConnections.forInspection(path: path, busyTimeout: busyTimeout)).run()
        defer { outcome.connection.close() }
        let key = outcome.key
        let format: String
        if key.isPlaintext {
            format = "plaintext"
        } else if key.legacy {
            format = "legacy"
        } else {
            format = key.cipher.format().description
        }
        let journalMode: String
        let pages: (Integrity, String?, String)
        do {
            journalMode = try outcome.connection.journalMode()
            pages = try checkPages(outcome.connection, key: key)
        } catch let error as EncryptedDatabaseError {
            throw error
        } catch {
            throw .ioFailure(path: path, operation: "checking the database's health", detail: "\(error)")
        }
        let age = KeyAge(path: path, keys: keys, maximumDays: maximumKeyAgeDays, now: now)
        return DatabaseHealth(
            path: path, keyID: key.id, currentKeyID: keys.currentID, needsRotation: key.id != keys.currentID, format: format,
            journalMode: journalMode, bytes: FileSystem.size(of: path) ?? 0, walBytes: FileSystem.size(of: path + "-wal") ?? 0,
            integrity: pages.0, integrityDetail: pages.1, integrityMethod: pages.2,
            currentKeyCreated: age.created, currentKeyAgeDays: age.ageDays, maximumKeyAgeDays: maximumKeyAgeDays)
    }

    /// Checks every page's HMAC: with `PRAGMA cipher_integrity_check` on SQLCipher 4, else with
    /// the library's page layer over the database file (pages still in a `-wal` file are checked
    /// by SQLite when read).
    private static func checkPages(_ connection: Connection, key: ResolvedKey) throws -> (Integrity, String?, String) {
        guard let material = key.material, !key.legacy, key.cipher.effective.useHMAC != false else {
            return (.notChecked, nil, "none")
        }
        if SQLCipherEngine.linked.major >= 4 {
            let problems = try connection.query("PRAGMA cipher_integrity_check").compactMap { try $0.get(0, as: String?.self) }
            return (problems.isEmpty ? .ok : .failed, problems.first, "cipher_integrity_check")
        }
        guard let format = PageFormat(settings: key.cipher), format.supportsPageReencryption else {
            return (.notChecked, nil, "none")
        }
        return try connection.transaction(.deferred) { connection in
            try connection.verifyReadable()  // a read lock: no checkpoint rewrites the file meanwhile
            let file = try connection.mainDatabaseFile()
            let pageCount = UInt32(try file.size() / Int64(format.pageSize))
            let page = PageBuffer(count: format.pageSize)
            guard try file.read(into: page.bytes, at: 0) == format.pageSize else { return (.failed, "page 1 could not be read whole", "page HMACs") }
            let salt = Array(page.bytes.prefix(PageFormat.saltSize))
            let spec = material.derived(forSalt: salt, derivation: format.keyDerivation) ?? material
            guard let keys = PageKeys.derive(from: spec, salt: salt, format: format), let cipher = PageCipher(keys: keys, format: format) else {
                return (.notChecked, nil, "none")
            }
            for number in 1...max(pageCount, 1) where number != format.lockBytePage {
                guard try file.read(into: page.bytes, at: Int64(number - 1) * Int64(format.pageSize)) == format.pageSize else {
                    return (.failed, "page \(number) could not be read whole", "page HMACs")
                }
                guard cipher.authenticates(UnsafeRawBufferPointer(page.bytes), number: number) else {
                    return (.failed, "page \(number) fails its HMAC check with its key: the file is damaged there", "page HMACs")
                }
            }
            return (.ok, nil, "page HMACs")
        }
    }
}
