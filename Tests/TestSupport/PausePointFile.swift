@testable import CipherFormats
@testable import EncryptedSQLite
@testable import KeyConfiguration
import Foundation

/// The small database the pause-point tests make anew for every round: the file and its side
/// files removed, then table `t` with `rows` rows of 300 random bytes, in `journalMode`.
public enum PausePointFile {
    /// Makes the file keyed with `key` (`nil`: plaintext) and returns the connection that wrote
    /// it, still open; `beforeRows` runs on it after the journal mode is set, before the rows.
    public static func make(at path: String, key: CipherKey?, journalMode: String = "delete", rows: Int,
                            beforeRows: (Connection) throws -> Void = { _ in }) throws -> Connection {
        for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        let connection = try Connection(path: path, access: .readWrite, create: true, key: key, busyTimeout: .seconds(5))
        _ = try connection.queryValue("PRAGMA journal_mode = \(journalMode)", as: String.self)
        try beforeRows(connection)
        try connection.execute("""
            CREATE TABLE t(id INTEGER PRIMARY KEY, payload BLOB);
            WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < \(rows))
            INSERT INTO t(payload) SELECT randomblob(300) FROM n;
            """)
        return connection
    }
}

/// What every pause-point test sets up: a folder, two raw keys (the first is the file's, the
/// second current), the database's path in it, its key list, and a VFS watch on the folder,
/// which the test stops when it is done (`defer { scene.watch.stop() }`).
public final class PausePointScene {
    public let directory: TemporaryDirectory
    public let ring: TestKeyring
    public let path: String
    public let keys: KeyList
    public let watch: VFSWatch

    /// `kinds` of the keys (two raw keys by default); with `plaintextID` the list starts with a
    /// plaintext entry.
    public init(_ name: String, kinds: [SourceKind] = [.hex, .hex], plaintextID: String? = nil) throws {
        directory = TemporaryDirectory(name)
        ring = TestKeyring(kinds, in: directory, plaintextID: plaintextID)
        path = directory.file("app.sqlite")
        keys = try ring.keyList(database: path)
        watch = VFSWatch(folder: directory.path)
    }

}

/// The file sizes the pause-point scenarios run at: their default, or the row counts listed in
/// `PAUSE_POINT_ROWS` (comma-separated) for a stress run. Each size makes another file and so
/// another sequence of file operations, each of them a pause point.
public enum PausePointSizes {
    public static func rows(default value: Int) -> [Int] {
        let listed = (ProcessInfo.processInfo.environment["PAUSE_POINT_ROWS"] ?? "").split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        return listed.isEmpty ? [value] : listed
    }
}
