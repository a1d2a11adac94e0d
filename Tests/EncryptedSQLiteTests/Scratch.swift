import EncryptedSQLite
import Foundation
import TestSupport

/// A new encrypted database (raw key, no KDF cost) in its own folder.
struct Scratch {
    let directory = TemporaryDirectory("scratch")
    let path: String
    let database: EncryptedDatabase

    init(walMode: Bool = false) throws {
        path = directory.file("scratch.sqlite")
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "k", source: .hex(TestKeys.hex()))])
        database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(createIfMissing: true))
        if walMode { try database.writeWithoutTransaction { db in _ = try db.queryValue("PRAGMA journal_mode = WAL", as: String.self) } }
    }

    func run<T>(_ body: (Connection) throws -> T) throws -> T { try database.writeWithoutTransaction(body) }
}
