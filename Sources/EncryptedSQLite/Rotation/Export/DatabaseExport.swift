import CipherFormats
import Foundation
import KeyConfiguration
import SQLCipherConnection

/// Copies a database into a new file with another key and/or other cipher settings through
/// SQLCipher's `sqlcipher_export`, and checks the copy against facts recorded from the original:
/// the copying step of the export path (``ExportRotation``) and of the inspection tools' decrypted
/// copies.
struct DatabaseExport {
    /// The original database.
    let path: String
    let busyTimeout: Duration

    /// The schema name of the new file while it is attached.
    static let schema = "rekey_export"

    /// What the new file must reproduce.
    struct SourceFacts {
        let journalMode: String
        let userVersion: Int32
        let applicationID: Int32
        let autoVacuum: Int
        let pageSize: Int
        let schema: [String]
        let rowCounts: [String: Int64]

        init(_ connection: Connection, journalMode: String) throws {
            self.journalMode = journalMode
            userVersion = try connection.userVersion()
            applicationID = try connection.applicationID()
            autoVacuum = try connection.queryValue("PRAGMA auto_vacuum", as: Int.self) ?? 0
            pageSize = try connection.integerPragma("page_size") ?? 4096
            (schema, rowCounts) = try Self.content(connection)
        }

        /// Every schema object (type, name, table, SQL) and the row count of every table.
        static func content(_ connection: Connection) throws -> ([String], [String: Int64]) {
            let objects = try connection.query("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_autoindex_%' ORDER BY type, name")
            var schema: [String] = []
            var counts: [String: Int64] = [:]
            for object in objects {
                let type = try object.get("type", as: String.self)
                let name = try object.get("name", as: String.self)
                let table = try object.get("tbl_name", as: String.self)
                let sql = try object.get("sql", as: String?.self) ?? ""
                schema.append("\(type)|\(name)|\(table)|\(sql)")
                if type == "table" && !sql.uppercased().hasPrefix("CREATE VIRTUAL TABLE") {
                    counts[name] = try connection.queryValue("SELECT count(*) FROM \(SQLIdentifier.quoted(name))", as: Int64.self) ?? 0
                }
            }
            return (schema, counts)
        }
    }

    /// Exports the database, read with `from`, into the new file `temporary` keyed with `to` (unencrypted
    /// when `to` has no material), carrying over what `sqlcipher_export` does not copy; the copy is
    /// put in WAL mode when `walMode` is set.
    /// - Throws: ``EncryptedDatabaseError``.
    func export(from: ResolvedKey, to: ResolvedKey, into temporary: String, original: SourceFacts, walMode: Bool) throws(EncryptedDatabaseError) {
        do {
            let exporter = try KeyedConnections(path: path, access: .readWrite, busyTimeout: busyTimeout).connect(from)
            defer { exporter.close() }
            _ = try copy(on: exporter, to: to, into: temporary, original: original, walMode: walMode)
        } catch {
            throw EncryptedDatabaseError.from(error, path: path, operation: "exporting into \(temporary)")
        }
    }

    /// Exports the database `exporter` has open into the new file `temporary` keyed with `to`, in
    /// one transaction; returns the facts of the copied snapshot: `original`, or when it is `nil`
    /// the facts read inside that transaction (so that they describe exactly what was copied while
    /// other connections go on writing).
    func copy(on exporter: Connection, to: ResolvedKey, into temporary: String, original: SourceFacts?, walMode: Bool) throws -> SourceFacts {
        try exporter.attach(path: temporary, as: Self.schema, key: to.cipherKey)
        func prepareCopy(_ facts: SourceFacts) throws {
            if to.material == nil {
                try exporter.execute("PRAGMA \(Self.schema).page_size = \(facts.pageSize)")
            }
            try exporter.execute("PRAGMA \(Self.schema).auto_vacuum = \(facts.autoVacuum)")
        }
        if let original { try prepareCopy(original) }
        try exporter.execute("BEGIN")
        let facts: SourceFacts
        do {
            // Without recorded facts, read them in the transaction that copies: the same snapshot.
            facts = try original ?? SourceFacts(exporter, journalMode: exporter.journalMode())
            if original == nil { try prepareCopy(facts) }
            _ = try exporter.queryValue("SELECT sqlcipher_export('\(Self.schema)')", as: String.self)
            try exporter.execute("PRAGMA \(Self.schema).user_version = \(facts.userVersion)")
            try exporter.execute("PRAGMA \(Self.schema).application_id = \(facts.applicationID)")
            try exporter.execute("COMMIT")
        } catch {
            try? exporter.execute("ROLLBACK")
            throw error
        }
        try exporter.detach(Self.schema)
        if walMode {
            // Put the new file in WAL mode on its own connection; closing it removes its WAL.
            let walSetter = try KeyedConnections(path: temporary, access: .readWrite, busyTimeout: busyTimeout).connect(to)
            _ = try walSetter.queryValue("PRAGMA journal_mode = WAL", as: String.self)
            walSetter.close()
        }
        return facts
    }

    /// Opens the temporary on a fresh connection with the new key and compares it with the original.
    /// Opens the copy on a fresh connection with its key and checks it: `check` (a PRAGMA, or
    /// none), then the same schema, row count in every table, `user_version`, `application_id` and
    /// page size as recorded from the original.
    /// `copy` names the copy in the error and `outcome` says what was left as it was (a rotation's
    /// original file; a backup's or decrypted copy's target, never written).
    /// - Throws: ``EncryptedDatabaseError/verificationFailed(path:keyID:detail:)``.
    func verify(_ temporary: String, key: ResolvedKey, against original: SourceFacts, check: String?,
                copy: String = "the exported copy", outcome: String = "the original was left in place") throws(EncryptedDatabaseError) {
        func fail(_ detail: String) -> EncryptedDatabaseError {
            .verificationFailed(path: path, keyID: key.id, detail: "\(copy) \(detail); \(outcome)")
        }
        do {
            // Read-write so that closing it removes the WAL and shared-memory files of a WAL-mode copy.
            let connection = try KeyedConnections(path: temporary, access: .readWrite, busyTimeout: busyTimeout).connect(key)
            defer { connection.close() }
            try connection.verifyReadable()
            if let check {
                let result = try connection.query(check).compactMap { try $0.get(0, as: String?.self) }
                guard result == ["ok"] else { throw fail("failed \(check): \(result.prefix(3).joined(separator: "; "))") }
            }
            let (schema, counts) = try SourceFacts.content(connection)
            guard schema == original.schema else { throw fail("has a different schema") }
            guard counts == original.rowCounts else { throw fail("has different row counts") }
            guard try connection.userVersion() == original.userVersion, try connection.applicationID() == original.applicationID else {
                throw fail("has a different user_version or application_id")
            }
            if key.material != nil, let size = key.cipher.effective.pageSize,
               let actual = try connection.integerPragma("cipher_page_size"), actual != size {
                throw fail("has page size \(actual) instead of \(size)")
            }
        } catch let error as EncryptedDatabaseError {
            throw error
        } catch {
            throw fail("could not be checked: \(error)")
        }
    }
}
