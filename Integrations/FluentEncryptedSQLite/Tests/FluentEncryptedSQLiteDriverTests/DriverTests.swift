import EncryptedSQLite
import FluentEncryptedSQLiteDriver
import FluentKit
import Foundation
import NIOPosix
import SQLKit
import XCTest

/// The driver's own behaviour: transactions, error mapping, the dialect's gaps, shutdown.
final class DriverTests: XCTestCase {
    final class Note: Model, @unchecked Sendable {
        static let schema = "notes"
        @ID(custom: "id", generatedBy: .database) var id: Int?
        @Field(key: "text") var text: String
        init() {}
        init(text: String) { self.text = text }
    }

    struct CreateNotes: AsyncMigration {
        func prepare(on database: any Database) async throws {
            try await database.schema("notes").field("id", .int, .identifier(auto: true)).field("text", .string, .required).unique(on: "text").create()
        }
        func revert(on database: any Database) async throws {
            try await database.schema("notes").delete()
        }
    }

    struct Abort: Error {}

    var folder: EncryptedFolder!
    var dbs: Databases!
    var db: (any Database)!

    override class func setUp() {
        XCTAssert(isLoggingConfigured)
    }

    override func setUp() async throws {
        folder = try EncryptedFolder()
        dbs = Databases(threadPool: NIOThreadPool.singleton, on: MultiThreadedEventLoopGroup.singleton)
        dbs.use(.encryptedSQLite(path: folder.databasePath, keysFile: folder.keysPath, options: OpenOptions(createIfMissing: true, concurrentReaders: 2)), as: .sqlite)
        db = dbs.database(.sqlite, logger: .init(label: "test"), on: MultiThreadedEventLoopGroup.singleton.any())
        try await CreateNotes().prepare(on: db)
    }

    override func tearDown() async throws {
        await dbs?.shutdownAsync()
        (db, dbs, folder) = (nil, nil, nil)
    }

    func testThrowingTransactionRollsBack() async throws {
        try await Note(text: "before").create(on: db)
        await XCTAssertThrowsErrorAsync(try await self.db.transaction { tx in
            try await Note(text: "inside").create(on: tx)
            let seen = try await Note.query(on: tx).count()
            XCTAssertEqual(seen, 2, "the transaction sees its own insert")
            throw Abort()
        }) { XCTAssert($0 is Abort, "\($0)") }
        let texts = try await Note.query(on: db).all().map(\.text)
        XCTAssertEqual(texts, ["before"])
    }

    func testTransactionCommits() async throws {
        let id = try await db.transaction { tx in
            let note = Note(text: "committed")
            try await note.create(on: tx)
            return try note.requireID()
        }
        let note = try await Note.find(id, on: db)
        XCTAssertEqual(note?.text, "committed")
    }

    func testUniqueViolationIsConstraintFailure() async throws {
        try await Note(text: "same").create(on: db)
        await XCTAssertThrowsErrorAsync(try await Note(text: "same").create(on: self.db)) {
            let error = $0 as? any DatabaseError
            XCTAssertEqual(error?.isConstraintFailure, true, "\($0)")
            XCTAssertEqual(error?.isSyntaxError, false)
            XCTAssert(String(describing: $0).contains("UNIQUE"), "the library's message is kept: \($0)")
        }
    }

    func testInsertReportsGeneratedID() async throws {
        let first = Note(text: "a"), second = Note(text: "b")
        try await first.create(on: db)
        try await second.create(on: db)
        XCTAssertEqual(first.id, 1)
        XCTAssertEqual(second.id, 2)
    }

    func testClosedAfterShutdownIsConnectionClosed() async throws {
        await dbs.shutdownAsync()
        await XCTAssertThrowsErrorAsync(try await Note.query(on: self.db).count()) {
            XCTAssertEqual(($0 as? any DatabaseError)?.isConnectionClosed, true, "\($0)")
        }
        dbs = nil
    }

    func testDialectAnswersFromLinkedVersion() {
        let dialect = EncryptedSQLiteDialect()
        XCTAssertEqual(dialect.version, SQLiteVersion(parsing: SQLiteFeature.linkedVersion))
        XCTAssertEqual(dialect.supportsReturning, dialect.version >= SQLiteVersion(3, 35, 0))
        XCTAssertEqual(dialect.upsertSyntax == .standard, dialect.version >= SQLiteVersion(3, 24, 0))
        let old = EncryptedSQLiteDialect(version: SQLiteVersion(3, 15, 2))
        XCTAssertEqual(old.missingFeatures.map(\.name).sorted(),
                       EncryptedSQLiteDialect.Feature.all.map(\.name).sorted())
        XCTAssertFalse(old.supportsReturning)
        XCTAssertEqual(old.upsertSyntax, .unsupported)
        XCTAssertEqual(EncryptedSQLiteDialect(version: SQLiteVersion(3, 46, 1)).missingFeatures, [])
    }
}
