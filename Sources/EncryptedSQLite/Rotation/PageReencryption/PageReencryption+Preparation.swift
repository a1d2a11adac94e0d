import CipherFormats
import DurableFiles
import Foundation
import SQLCipherConnection

/// Phase A of a page re-encryption: take the file for ourselves and gather what the rewrite needs.
extension PageReencryption {
    /// What the rewrite needs, gathered under the EXCLUSIVE lock.
    struct Prepared: Sendable {
        let format: PageFormat
        let database: any RandomAccessFile
        let pageCount: UInt32
        let bytes: Int64
        let oldKeys: PageKeys
        let newKeys: PageKeys
        let journal: RollbackJournal
        let mode: mode_t
    }

    /// A reason to leave the rotation to the engine's rekey, found before anything changed.
    struct NotApplicable: Error {
        let reason: String
    }

    /// Takes the EXCLUSIVE lock and gathers what the rewrite needs; nothing is written.
    /// - Throws: ``NotApplicable`` when the engine's rekey should do the job instead, or
    ///   ``EncryptedDatabaseError``.
    func prepare(_ connection: Connection, in context: RotationContext, fromMaterial: KeyMaterial, toMaterial: KeyMaterial) throws -> Prepared {
        try context.step("locking the database for rotation") { try connection.execute("BEGIN EXCLUSIVE") }
        // Reading inside the transaction makes SQLite take the lock now (and roll back any hot
        // journal another process left), and proves the key once more.
        try context.step("locking the database for rotation") { try connection.verifyReadable() }
        if FileManager.default.fileExists(atPath: context.path + "-journal") {
            throw NotApplicable(reason: "a journal file is present beside the database")
        }
        // The journal mode the connection reported before the lock can be stale: another process
        // may have put the file in WAL mode since this connection last read it, and taking the
        // lock then opened that process's WAL. The lock then excludes only other writers, not the
        // WAL's readers and checkpoints, so the file must not be rewritten underneath them.
        if try context.step("reading the journal mode", { try connection.journalMode() }) == "wal" {
            throw NotApplicable(reason: "another process put the file in WAL mode and has it open")
        }
        let database = WriteBehindFile(context.files.observe(try context.step("opening the database file") { try connection.mainDatabaseFile() }),
                                       interval: writeBehindBytes)
        let bytes = try context.step("reading the database size") { () throws(FileSystemError) -> Int64 in try database.size() }
        guard bytes >= Int64(format.pageSize), bytes % Int64(format.pageSize) == 0, bytes / Int64(format.pageSize) < Int64(UInt32.max) else {
            throw NotApplicable(reason: "the file size is not a whole number of \(format.pageSize)-byte pages")
        }
        let pageCount = UInt32(bytes / Int64(format.pageSize))
        try context.requireSpace(bytes: RollbackJournal(pageSize: format.pageSize, databasePages: pageCount).size(recordCount: Int(pageCount)), for: "the rotation's journal")

        let firstPage = PageBuffer(count: format.pageSize)
        let read = try context.step("reading page 1") { () throws(FileSystemError) -> Int in try database.read(into: firstPage.bytes, at: 0) }
        guard read == format.pageSize else { throw NotApplicable(reason: "page 1 could not be read whole") }
        let salt = Array(firstPage.bytes.prefix(PageFormat.saltSize))
        // The connection was keyed with the material's derived key for this salt; reuse it.
        let oldSpec = fromMaterial.derived(forSalt: salt, derivation: format.keyDerivation) ?? fromMaterial
        guard let oldKeys = PageKeys.derive(from: oldSpec, salt: salt, format: format),
              let cipher = PageCipher(keys: oldKeys, format: format),
              cipher.authenticates(UnsafeRawBufferPointer(firstPage.bytes), number: 1), !PageCipher.isAllZeros(UnsafeRawBufferPointer(firstPage.bytes))
        else {
            throw NotApplicable(reason: "page 1 does not authenticate with the library's derivation of the old key")
        }
        // The salt stays (as with the engine's rekey): SQLCipher reads a file's salt when a key is
        // set, *before* SQLite rolls back a hot journal, so after a crash a page 1 with a new salt
        // would make the first open of any other SQLCipher fail.
        guard let newKeys = PageKeys.derive(from: toMaterial, salt: salt, format: format) else {
            throw NotApplicable(reason: "the new key could not be derived")
        }
        // Connections opened on the rotated file key with this, without another derivation.
        toMaterial.remember(newKeys, derivation: format.keyDerivation)
        return Prepared(format: format, database: database, pageCount: pageCount, bytes: bytes, oldKeys: oldKeys, newKeys: newKeys,
                        journal: RollbackJournal(pageSize: format.pageSize, databasePages: pageCount),
                        mode: FileSystem.permissions(of: context.path) ?? 0o600)
    }
}
