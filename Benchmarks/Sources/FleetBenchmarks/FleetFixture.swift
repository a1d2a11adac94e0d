import CSQLCipher
import CipherFormats
import EncryptedSQLite
import Foundation

/// The fleet's files, made fast outside every timed region: small databases keyed through the
/// SQLCipher C API (engine-default format, `synchronous = OFF` while making them), and Keys files
/// written as text.
enum FleetFixture {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Makes a database at `path` keyed with `key` (a passphrase, or `x'<64 hex>'` for a raw key)
    /// holding one small table.
    static func makeDatabase(at path: String, key: String) throws {
        var handle: OpaquePointer?
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK, let handle else {
            throw Failure(description: "cannot create \(path)")
        }
        defer { sqlite3_close(handle) }
        let keyed = Array(key.utf8).withUnsafeBytes { sqlite3_key(handle, $0.baseAddress, Int32($0.count)) }
        guard keyed == SQLITE_OK else { throw Failure(description: "sqlite3_key failed on \(path)") }
        let sql = "PRAGMA synchronous = OFF; CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT); INSERT INTO notes(text) VALUES ('tenant note');"
        guard sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK else {
            throw Failure(description: "cannot write \(path): \(String(cString: sqlite3_errmsg(handle)))")
        }
    }

    /// Opens `path` through the SQLCipher C API with `key`, reads its row count and closes it.
    static func openWithEngine(_ path: String, key: String) throws {
        var handle: OpaquePointer?
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK, let handle else {
            throw Failure(description: "cannot open \(path)")
        }
        defer { sqlite3_close(handle) }
        _ = Array(key.utf8).withUnsafeBytes { sqlite3_key(handle, $0.baseAddress, Int32($0.count)) }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, "SELECT count(*) FROM notes", -1, &statement, nil) == SQLITE_OK else {
            throw Failure(description: "\(path) does not open with its key")
        }
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW, sqlite3_column_int(statement, 0) == 1 else { throw Failure(description: "\(path): wrong row count") }
    }

    /// `x'<64 hex>'`: the data key as SQLCipher's raw-key text.
    static func rawKeyText(_ key: DataKey) -> String {
        key.withUnsafeBytes { "x'" + $0.map { String(format: "%02x", $0) }.joined() + "'" }
    }

    /// `count` random bytes.
    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    /// One passphrase KEK of a Keys file: a random passphrase and salt.
    struct PassphraseKEK {
        let id: String
        let passphrase: String
        let saltBytes: [UInt8]
        var salt: String { FleetFixture.hex(saltBytes) }

        init(id: String) {
            self.id = id
            passphrase = "fleet master " + FleetFixture.hex(FleetFixture.randomBytes(16))
            saltBytes = FleetFixture.randomBytes(16)
        }

        /// The same AES key as the library derives (PBKDF2-HMAC-SHA512, its rounds, this salt),
        /// derived here without the library's per-process cache of derived passphrase KEKs, so
        /// that the cache stays empty for the timed runs.
        func derivedOutsideTheLibrary() throws -> LocalKeyEncryptionKey {
            let derived = Array(passphrase.utf8).withUnsafeBytes { bytes in
                PBKDF2.derive(bytes, salt: saltBytes, iterations: LocalKeyEncryptionKey.passphraseRounds, digest: .sha512, byteCount: DataKey.byteCount)
            }
            return LocalKeyEncryptionKey(id: id, key: try derived!.withUnsafeBytes { try DataKey(copying: $0) })
        }
    }

    /// One database's key entry: its id and the wrapped value.
    struct WrappedEntry {
        let id: String
        let value: WrappedDataKey
    }

    /// A Keys file's text: the KEKs, then one `databases:` entry per path with its wrapped keys.
    static func keysFileText(keyEncryptionKeys: [PassphraseKEK], databases: [(path: String, keys: [WrappedEntry])]) -> String {
        keysFileText(keyEncryptionKeyLines: keyEncryptionKeys.map { "  - id: \($0.id)\n    passphrase: \"\($0.passphrase)\"\n    salt: \($0.salt)\n" }, databases: databases)
    }

    /// A Keys file's text with the KEK items given as lines (`  - id: …`), then the databases.
    static func keysFileText(keyEncryptionKeyLines: [String], databases: [(path: String, keys: [WrappedEntry])]) -> String {
        var text = "key_encryption_keys:\n" + keyEncryptionKeyLines.joined()
        text += "databases:\n"
        text.reserveCapacity(databases.count * 200)
        for database in databases {
            text += "  - path: \(database.path)\n    keys:\n"
            for key in database.keys {
                text += "      - id: \(key.id)\n        wrapped_by: \(key.value.keyEncryptionKeyID)\n        wrapped_key: \(key.value.text)\n"
            }
        }
        return text
    }

    /// Replaces `path` with `text` durably: a new temporary (mode 0600) written and flushed,
    /// renamed over the file, the folder flushed. A crash leaves the old file or the new one.
    static func replaceDurably(_ path: String, with text: String) throws {
        try replaceDurably(path, bytes: Array(text.utf8))
    }

    /// Replaces `path` with a key's bytes durably (mode 0600), as for a text.
    static func replaceDurably(_ path: String, with key: DataKey) throws {
        try replaceDurably(path, bytes: key.bytes.withUnsafeBytes { Array($0) })
    }

    private static func replaceDurably(_ path: String, bytes: [UInt8]) throws {
        let temporary = path + ".tmp-\(getpid())"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Failure(description: "cannot create \(temporary): \(String(cString: strerror(errno)))") }
        var bytes = bytes
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeMutableBytes { write(descriptor, $0.baseAddress! + written, $0.count - written) }
            guard count > 0 else { close(descriptor); throw Failure(description: "cannot write \(temporary)") }
            written += count
        }
        bytes.removeAll()
        guard fsync(descriptor) == 0, close(descriptor) == 0 else { throw Failure(description: "cannot flush \(temporary)") }
        guard rename(temporary, path) == 0 else { throw Failure(description: "cannot rename \(temporary)") }
        let folder = open((path as NSString).deletingLastPathComponent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard folder >= 0 else { throw Failure(description: "cannot open the folder of \(path)") }
        defer { close(folder) }
        guard fsync(folder) == 0 else { throw Failure(description: "cannot flush the folder of \(path)") }
    }
}
