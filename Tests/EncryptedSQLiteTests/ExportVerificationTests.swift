import DurableFiles
@testable import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// How a test spoils the export's copy after it is written and before it is verified.
enum CopyAlteration: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case rowMissing, userVersion, pageSize

    var testDescription: String {
        switch self {
        case .rowMissing: "a row missing"
        case .userVersion: "another user_version"
        case .pageSize: "another page size (2048 instead of the engine's default), same content"
        }
    }

    /// What the verification's error says about such a copy.
    var expectedDetail: [String] {
        switch self {
        case .rowMissing: ["has different row counts"]
        case .userVersion: ["has a different user_version or application_id"]
        // SQLCipher (3.4.1 and 4.6.1) does not open a copy with another page size at the configured one.
        case .pageSize: ["could not be checked: SQLite error 26"]
        }
    }
}

@Suite("Export path: verification of the new copy", .ownThread)
struct ExportVerificationTests {
    @Test("a copy that differs from the original's recorded facts is refused before the swap: a verification error, the original byte-identical, no temporary left",
          arguments: CopyAlteration.allCases)
    func refusesAlteredCopy(_ alteration: CopyAlteration) throws {
        let directory = TemporaryDirectory("export-verify")
        let ring = TestKeyring([.hex], in: directory, plaintextID: "v0")
        let path = directory.file("app.sqlite")
        try SQLiteShell.createFixture(at: path, rows: 50)
        let snapshot = FileSnapshot(path)
        let newKey = ring.keys[0]

        let altered = EventCounter()
        var options = OpenOptions()
        // The copy is complete and encrypted with the new key here; the independent shell spoils it.
        options.files.written = { copy in
            _ = altered.next()
            switch alteration {
            case .rowMissing:
                let result = try? SQLCipherShell.run(copy, key: newKey.shellKey, "DELETE FROM people WHERE id = 17;")
                #expect(result?.status == 0, "\(result?.stderr ?? "")")
            case .userVersion:
                let result = try? SQLCipherShell.run(copy, key: newKey.shellKey, "PRAGMA user_version = 43;")
                #expect(result?.status == 0, "\(result?.stderr ?? "")")
            case .pageSize:
                // The same schema, rows, user_version and application_id, written with 2048-byte
                // pages: the default of neither engine (1024 on SQLCipher 3, 4096 on SQLCipher 4).
                let replacement = copy + ".replacement"
                let result = try? SQLCipherShell.run(replacement, key: newKey.shellKey, "PRAGMA cipher_page_size = 2048;\n" + Fixture.sql(rows: 50))
                #expect(result?.status == 0, "\(result?.stderr ?? "")")
                #expect(rename(replacement, copy) == 0)
            }
        }

        #expect {
            _ = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: options)
        } throws: { error in
            guard case .verificationFailed(path, "k1", let detail) = error as? EncryptedDatabaseError else { return false }
            return detail.hasPrefix("the exported copy ") && detail.hasSuffix("the original was left in place")
                && alteration.expectedDetail.contains { detail.contains($0) }
        }
        #expect(altered.count == 1, "the export should have handed its copy to the seam once")
        // Byte for byte the plaintext original, and the folder as it was: no temporary, no journal.
        #expect(FileSnapshot(path) == snapshot)
        #expect(DatabaseFileKind.inspect(path: path) == .plaintextSQLite(bytes: snapshot.bytes?.count ?? 0))
        #expect(try SQLiteShell.run(path, "SELECT count(*) FROM people; PRAGMA user_version;").stdout == "50\n42\n")
    }

    @Test("the unaltered copy passes the same verification and is swapped in (the control for the test above)")
    func unalteredCopyPasses() throws {
        let directory = TemporaryDirectory("export-verify-ok")
        let ring = TestKeyring([.hex], in: directory, plaintextID: "v0")
        let path = directory.file("app.sqlite")
        try SQLiteShell.createFixture(at: path, rows: 50)
        let seen = EventCounter()
        var options = OpenOptions()
        options.files.written = { _ in _ = seen.next() }
        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: options)
        #expect(database.report.rotation?.method == .export)
        #expect(seen.count == 1)
        #expect(try SQLCipherShell.run(path, key: ring.keys[0].shellKey, "SELECT count(*) FROM people; PRAGMA user_version;").stdout == "50\n42\n")
    }
}
