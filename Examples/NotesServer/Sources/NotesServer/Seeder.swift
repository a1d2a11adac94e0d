import EncryptedSQLite
import Foundation
import Logging

/// `notes-server seed`: fills the database (created with the Keys file's current key when
/// missing) with notes of 1,000 characters until the file is at least `--size-mb` MB, in
/// transactions of 10,000 rows, so that load tests can rotate a large file.
struct Seeder {
    let options: ServerOptions
    let logger: Logger

    func run() async throws {
        let path = options.database
        let target = Int64(options.sizeMB) * 1_000_000
        let database = try EncryptedDatabase(
            path: path, keysFile: options.keysFile, options: OpenOptions(createIfMissing: true, logger: logger),
            migrator: try NotesSchema.migrator())
        var rows = try await database.read { db in try db.queryValue("SELECT count(*) FROM notes", as: Int.self) ?? 0 }
        while Self.size(of: path) < target {
            try await database.write { db in
                try db.execute("""
                    WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 10000)
                    INSERT INTO notes(text, author) SELECT 'seed ' || lower(hex(randomblob(497))), 'seed-' || (x % 16) FROM n
                    """)
            }
            rows += 10_000
            logger.info("seeding", metadata: ["rows": "\(rows)", "bytes": "\(Self.size(of: path))"])
        }
        print("seeded \(path): \(rows) rows, \(Self.size(of: path)) bytes")
    }

    private static func size(of path: String) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? 0
    }
}
