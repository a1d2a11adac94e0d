import EncryptedSQLite
import FluentEncryptedSQLiteDriver
import FluentKit
import Foundation
import NIOPosix
import XCTest

/// Key rotation through the driver, checked as an operator would: with the `sqlcipher` shell, an
/// independent tool, after Fluent shut the database down. The file must open with the newest key
/// only, with every row Fluent wrote.
final class RotationTests: XCTestCase {
    typealias Note = DriverTests.Note

    override class func setUp() {
        XCTAssert(isLoggingConfigured)
    }

    func testOpeningAFileOnAnOlderKeyRotatesItToTheCurrentKey() async throws {
        let folder = try EncryptedFolder()
        try await Self.makeFile(folder, onKey: "test-old", notes: ["on the old key"])
        let dbs = Self.databases(.encryptedSQLite(path: folder.databasePath, keysFile: folder.keysPath, options: OpenOptions(concurrentReaders: 2)))
        let db = try XCTUnwrap(dbs.database(.sqlite, logger: .init(label: "test"), on: MultiThreadedEventLoopGroup.singleton.any()))
        // Fluent's first query opens the file, which rotates it.
        let texts = try await Note.query(on: db).all().map(\.text)
        XCTAssertEqual(texts, ["on the old key"])
        try await Note(text: "after the rotation").create(on: db)
        await dbs.shutdownAsync()
        try Self.expectOnly(folder, key: "test-current", notes: ["on the old key", "after the rotation"], refused: ["test-old"])
    }

    func testFollowsARotationThatRekeyMakesInAnotherProcess() async throws {
        let folder = try EncryptedFolder()
        let dbs = Self.databases(.encryptedSQLite(path: folder.databasePath, keysFile: folder.keysPath, options: OpenOptions(createIfMissing: true, concurrentReaders: 2)))
        let db = try XCTUnwrap(dbs.database(.sqlite, logger: .init(label: "test"), on: MultiThreadedEventLoopGroup.singleton.any()))
        try await DriverTests.CreateNotes().prepare(on: db)
        try await Note(text: "before").create(on: db)
        // The operator appends a key and runs rekey while the app serves: the app steps aside.
        try folder.appendKey("test-next")
        let rekey = try Self.runRekey(folder)
        XCTAssertEqual(rekey.status, 0, rekey.output)
        // The app goes on, on the new key (read from the Keys file), with its pool and its writer.
        try await Note(text: "after").create(on: db)
        let texts = try await Note.query(on: db).sort(\.$id).all().map(\.text)
        XCTAssertEqual(texts, ["before", "after"])
        await dbs.shutdownAsync()
        try Self.expectOnly(folder, key: "test-next", notes: ["before", "after"], refused: ["test-old", "test-current"])
    }

    func testBackgroundRotationWhileFluentWrites() async throws {
        let folder = try EncryptedFolder()
        try await Self.makeFile(folder, onKey: "test-old", notes: ["first"])
        var options = OpenOptions(concurrentReaders: 2)
        options.backgroundRotation = true
        let database = try EncryptedDatabase(path: folder.databasePath, keysFile: folder.keysPath, options: options)
        XCTAssertEqual(database.report.openedWithKeyID, "test-old")
        let rotation = try XCTUnwrap(database.backgroundRotation)
        let dbs = Self.databases(.encryptedSQLite(database: database))
        let db = try XCTUnwrap(dbs.database(.sqlite, logger: .init(label: "test"), on: MultiThreadedEventLoopGroup.singleton.any()))
        // Writes and reads while the copy runs (or after it ended: the rows must be there either way).
        for index in 0..<20 {
            try await Note(text: "while rotating \(index)").create(on: db)
            _ = try await Note.query(on: db).count()
        }
        let report = try await rotation.result()
        XCTAssertEqual(report.toKeyID, "test-current")
        try await Note(text: "last").create(on: db)
        let count = try await Note.query(on: db).count()
        XCTAssertEqual(count, 22)
        await dbs.shutdownAsync()
        try Self.expectOnly(folder, key: "test-current", notes: ["first"] + (0..<20).map { "while rotating \($0)" } + ["last"], refused: ["test-old"])
    }

    // MARK: Helpers

    static func databases(_ configuration: DatabaseConfigurationFactory) -> Databases {
        let dbs = Databases(threadPool: NIOThreadPool.singleton, on: MultiThreadedEventLoopGroup.singleton)
        dbs.use(configuration, as: .sqlite)
        return dbs
    }

    /// A file on key `id` only, holding `notes`, made by the library with a list that ends there.
    static func makeFile(_ folder: EncryptedFolder, onKey id: String, notes: [String]) async throws {
        let keys = try KeyList(database: folder.databasePath, keys: [folder.key(id)])
        let database = try EncryptedDatabase(path: folder.databasePath, keys: keys, options: OpenOptions(createIfMissing: true))
        try await database.write { db in
            try db.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT NOT NULL UNIQUE)")
            for note in notes { try db.execute("INSERT INTO notes(text) VALUES (?)", [note]) }
        }
        await database.close()
    }

    /// The shell reads exactly `notes` with key `id`, and cannot read the file with the `refused` keys.
    static func expectOnly(_ folder: EncryptedFolder, key id: String, notes: [String], refused: [String],
                           file: StaticString = #filePath, line: UInt = #line) throws {
        let read = try shell(folder, key: id, "SELECT text FROM notes ORDER BY id;")
        XCTAssertEqual(read.status, 0, read.output, file: file, line: line)
        XCTAssertEqual(read.output.split(separator: "\n").map(String.init), notes, file: file, line: line)
        for old in refused {
            let attempt = try shell(folder, key: old, "SELECT count(*) FROM notes;")
            XCTAssertNotEqual(attempt.status, 0, "the key \(old) still opens the file: \(attempt.output)", file: file, line: line)
        }
    }

    /// Runs `sql` in the `sqlcipher` shell with key `id`, given on standard input (never in argv).
    static func shell(_ folder: EncryptedFolder, key id: String, _ sql: String) throws -> (status: Int32, output: String) {
        let hex = folder.keys.first { $0.id == id }!.hex
        let script = ".output /dev/null\nPRAGMA key = \"x'\(hex)'\";\n.output stdout\n\(sql)\n"
        return try run("/usr/bin/env", ["sqlcipher", "-batch", "-bail", folder.databasePath], input: script)
    }

    /// `rekey --keys Keys --db test.sqlite`, the repository's command, built by the root package's
    /// `swift build` (scripts/test.sh builds it first).
    static func runRekey(_ folder: EncryptedFolder) throws -> (status: Int32, output: String) {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let rekey = root.appendingPathComponent(".build/debug/rekey").path
        guard FileManager.default.isExecutableFile(atPath: rekey) else {
            throw Missing(description: "no rekey at \(rekey): run `swift build` in the repository's root first")
        }
        return try run(rekey, ["--keys", folder.keysPath, "--db", folder.databasePath], input: "")
    }

    struct Missing: Error, CustomStringConvertible {
        let description: String
    }

    static func run(_ executable: String, _ arguments: [String], input: String) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe(), standardInput = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = standardInput
        try process.run()
        standardInput.fileHandleForWriting.write(Data(input.utf8))
        try standardInput.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
