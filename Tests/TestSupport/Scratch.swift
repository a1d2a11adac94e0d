import EncryptedSQLite
import Foundation

/// A new encrypted database (raw key, no KDF cost) in its own folder; with `readers`, in WAL mode
/// and opened again with a pool of that many readers.
public struct Scratch {
    public let directory = TemporaryDirectory("scratch")
    public let path: String
    public let database: EncryptedDatabase

    public init(walMode: Bool = false, readers: Int = 0) throws {
        path = directory.file("scratch.sqlite")
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "k", source: .hex(TestKeys.hex()))])
        var database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(createIfMissing: true))
        if walMode || readers > 0 {
            try database.writeWithoutTransaction { db in _ = try db.queryValue("PRAGMA journal_mode = WAL", as: String.self) }
        }
        if readers > 0 { database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(concurrentReaders: readers)) }
        self.database = database
    }

    public func run<T>(_ body: (Connection) throws -> T) throws -> T { try database.writeWithoutTransaction(body) }
}
