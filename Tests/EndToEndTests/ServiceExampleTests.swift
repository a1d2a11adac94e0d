import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// The example service of the "A Service with EncryptedSQLite" article: built with the package,
/// run here on real files, and its code compared with the article's, so that neither can rot.
@Suite("The example service: it runs, rotates on start-up, and the article shows its code", .ownThread)
struct ServiceExampleTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("first run creates and migrates the database; after a key is appended, the next start rotates it and keeps every note")
    func runsAndRotatesOnStartUp() throws {
        let directory = TemporaryDirectory("service")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let keysFile = directory.file("Keys")
        let database = directory.file("notes.sqlite")

        _ = FileManager.default.createFile(atPath: keysFile, contents: Data(
            ("databases:\n" + TestKeyring.yamlEntry(path: "notes.sqlite", plaintextID: nil, keys: [ring.keys[0]])).utf8), attributes: [.posixPermissions: 0o600])
        let first = try run(keysFile, database, ring)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("opened-with=\(ring.keys[0].id) rotated=false notes=20 ann=10"), "\(first.stdout)")

        // The operator appends a new current key; the service's next start rotates the file.
        _ = FileManager.default.createFile(atPath: keysFile, contents: Data(ring.yaml(databasePath: "notes.sqlite").utf8), attributes: [.posixPermissions: 0o600])
        let second = try run(keysFile, database, ring)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stdout.contains("opened-with=\(ring.keys[0].id) rotated=true notes=40 ann=20"), "\(second.stdout)")

        // The file is on the new key only, in the independent shell too.
        let byNew = try SQLCipherShell.run(database, key: ring.keys[1].shellKey, "SELECT count(*) FROM notes;")
        #expect(byNew.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "40")
        let byOld = try SQLCipherShell.run(database, key: ring.keys[0].shellKey, "SELECT count(*) FROM notes;")
        #expect(byOld.status != 0)
    }

    @Test("every Swift block of the article is the example's code, line for line")
    func articleShowsTheCode() throws {
        let article = try String(contentsOf: Self.repository.appendingPathComponent(
            "Sources/EncryptedSQLite/EncryptedSQLite.docc/AServiceWithEncryptedSQLite.md"), encoding: .utf8)
        let folder = Self.repository.appendingPathComponent("Examples/NotesService")
        let sources = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".swift") }
            .map { try String(contentsOf: folder.appendingPathComponent($0), encoding: .utf8) }
            .joined(separator: "\n")
        let blocks = article.components(separatedBy: "```swift\n").dropFirst().map { $0.components(separatedBy: "\n```")[0] }
        #expect(blocks.count >= 4)
        for block in blocks {
            #expect(sources.contains(block), "the article shows code that is not in Examples/NotesService:\n\(block)")
        }
    }

    private func run(_ keysFile: String, _ database: String, _ ring: TestKeyring) throws -> ProcessResult {
        try ProcessRunner.run(BuiltProduct.path("notes-service-example"), [keysFile, database], environment: ProcessRunner.withPATH(ring.environment),
                                     currentDirectory: (database as NSString).deletingLastPathComponent)
    }
}
