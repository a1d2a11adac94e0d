import EncryptedSQLite
import FluentBenchmark
import FluentEncryptedSQLiteDriver
import FluentKit
import FluentSQL
import Foundation
import Logging
import NIOCore
import NIOPosix
import SQLKit
import XCTest

/// The tests fluent-sqlite-driver 4.9.0 runs (FluentBenchmarker, and its own driver tests),
/// against this driver on a real encrypted file, opened from a Keys file with runtime-made keys.
final class FluentBenchmarkTests: XCTestCase {
    func testAggregate() throws { try self.benchmarker.testAggregate() }
    func testArray() throws { try self.benchmarker.testArray() }
    func testBatch() throws { try self.benchmarker.testBatch() }
    func testChild() throws { try self.benchmarker.testChild() }
    func testChildren() throws { try self.benchmarker.testChildren() }
    func testCodable() throws { try self.benchmarker.testCodable() }
    func testChunk() throws { try self.benchmarker.testChunk() }
    func testCompositeID() throws { try self.benchmarker.testCompositeID() }
    func testCRUD() throws { try self.benchmarker.testCRUD() }
    func testEagerLoad() throws { try self.benchmarker.testEagerLoad() }
    func testEnum() throws { try self.benchmarker.testEnum() }
    func testFilter() throws { try self.benchmarker.testFilter() }
    func testGroup() throws { try self.benchmarker.testGroup() }
    func testID() throws { try self.benchmarker.testID() }
    func testJoin() throws { try self.benchmarker.testJoin() }
    func testMiddleware() throws { try self.benchmarker.testMiddleware() }
    func testMigrator() throws { try self.benchmarker.testMigrator() }
    func testModel() throws {
        try skipUnlessSupported(.jsonFunctions)   // its nested-field filters use json_extract
        try self.benchmarker.testModel()
    }
    func testOptionalParent() throws { try self.benchmarker.testOptionalParent() }
    func testPagination() throws { try self.benchmarker.testPagination() }
    func testParent() throws { try self.benchmarker.testParent() }
    func testPerformance() throws {
        try skipUnlessSupported(.manyParameters)   // one INSERT of many rows binds more than 999 values
        try self.benchmarker.testPerformance()
    }
    func testRange() throws { try self.benchmarker.testRange() }
    func testSchema() throws { try self.benchmarker.testSchema() }
    func testSet() throws { try self.benchmarker.testSet() }
    func testSiblings() throws { try self.benchmarker.testSiblings() }
    func testSoftDelete() throws { try self.benchmarker.testSoftDelete() }
    func testSort() throws { try self.benchmarker.testSort() }
    func testSQL() throws {
        try skipUnlessSupported(.jsonFunctions)   // its nested-field query uses json_extract
        try self.benchmarker.testSQL()
    }
    func testTimestamp() throws { try self.benchmarker.testTimestamp() }
    func testTransaction() throws { try self.benchmarker.testTransaction() }
    func testUnique() throws { try self.benchmarker.testUnique() }

    func testDatabaseError() async throws {
        let sql = (self.database as! any SQLDatabase)

        await XCTAssertThrowsErrorAsync(try await sql.raw("asdf").run()) {
            XCTAssertTrue(($0 as? any DatabaseError)?.isSyntaxError ?? false, "\(String(reflecting: $0))")
            XCTAssertFalse(($0 as? any DatabaseError)?.isConstraintFailure ?? true, "\(String(reflecting: $0))")
            XCTAssertFalse(($0 as? any DatabaseError)?.isConnectionClosed ?? true, "\(String(reflecting: $0))")
        }

        try await sql.drop(table: "foo").ifExists().run()
        try await sql.create(table: "foo").column("name", type: .text, .unique).run()
        try await sql.insert(into: "foo").columns("name").values("bar").run()
        await XCTAssertThrowsErrorAsync(try await sql.insert(into: "foo").columns("name").values("bar").run()) {
            XCTAssertTrue(($0 as? any DatabaseError)?.isConstraintFailure ?? false, "\(String(reflecting: $0))")
            XCTAssertFalse(($0 as? any DatabaseError)?.isSyntaxError ?? true, "\(String(reflecting: $0))")
            XCTAssertFalse(($0 as? any DatabaseError)?.isConnectionClosed ?? true, "\(String(reflecting: $0))")
        }
    }

    // fluent-sqlite-driver#62: SQLite's ALTER TABLE only adds columns.
    func testUnsupportedUpdateMigration() async throws {
        struct UserMigration_v1_0_0: AsyncMigration {
            func prepare(on database: any Database) async throws {
                try await database.schema("users").id()
                    .field("email", .string, .required).field("password", .string, .required)
                    .unique(on: "email").create()
            }
            func revert(on database: any Database) async throws {
                try await database.schema("users").delete()
            }
        }
        struct UserMigration_v1_2_0: AsyncMigration {
            func prepare(on database: any Database) async throws {
                try await database.schema("users").field("apple_id", .string).unique(on: "apple_id").update()
            }
            func revert(on database: any Database) async throws {
                try await database.schema("users").deleteUnique(on: "apple_id").update()
            }
        }

        try await UserMigration_v1_0_0().prepare(on: self.database)
        await XCTAssertThrowsErrorAsync(try await UserMigration_v1_2_0().prepare(on: self.database)) {
            XCTAssert(String(describing: $0).contains("adding columns"))
        }
        await XCTAssertThrowsErrorAsync(try await UserMigration_v1_2_0().revert(on: self.database)) {
            XCTAssert(String(describing: $0).contains("adding columns"))
        }
        await XCTAssertNoThrowAsync(try await UserMigration_v1_0_0().revert(on: self.database))
    }

    // fluent-sqlite-driver#91: deleting a field is ALTER TABLE … DROP COLUMN.
    func testDeleteFieldMigration() async throws {
        try skipUnlessSupported(.dropColumn)
        struct UserMigration_v1_0_0: AsyncMigration {
            func prepare(on database: any Database) async throws {
                try await database.schema("users").id().field("email", .string, .required).field("password", .string, .required).create()
            }
            func revert(on database: any Database) async throws {
                try await database.schema("users").delete()
            }
        }
        struct UserMigration_v1_1_0: AsyncMigration {
            func prepare(on database: any Database) async throws {
                try await database.schema("users").deleteField("password").update()
            }
            func revert(on database: any Database) async throws {
                try await database.schema("users").field("password", .string, .required).update()
            }
        }

        await XCTAssertNoThrowAsync(try await UserMigration_v1_0_0().prepare(on: self.database))
        await XCTAssertNoThrowAsync(try await UserMigration_v1_1_0().prepare(on: self.database))
        await XCTAssertNoThrowAsync(try await UserMigration_v1_1_0().revert(on: self.database))
        await XCTAssertNoThrowAsync(try await UserMigration_v1_0_0().revert(on: self.database))
    }

    func testCustomJSON() async throws {
        struct Metadata: Codable { let createdAt: Date }
        final class Event: Model, @unchecked Sendable {
            static let schema = "events"
            @ID(custom: "id", generatedBy: .database) var id: Int?
            @Field(key: "metadata") var metadata: Metadata
        }
        final class EventStringlyTyped: Model, @unchecked Sendable {
            static let schema = "events"
            @ID(custom: "id", generatedBy: .database) var id: Int?
            @Field(key: "metadata") var metadata: [String: String]
        }
        struct EventMigration: AsyncMigration {
            func prepare(on database: any Database) async throws {
                try await database.schema(Event.schema)
                    .field("id", .int, .identifier(auto: false))
                    .field("metadata", .json, .required)
                    .create()
            }
            func revert(on database: any Database) async throws {
                try await database.schema(Event.schema).delete()
            }
        }

        let jsonEncoder = JSONEncoder()
        jsonEncoder.dateEncodingStrategy = .iso8601
        let jsonDecoder = JSONDecoder()
        jsonDecoder.dateDecodingStrategy = .iso8601
        let iso8601 = DatabaseID(string: "iso8601")
        let other = try EncryptedFolder()
        self.dbs.use(.encryptedSQLite(path: other.databasePath, keysFile: other.keysPath, options: OpenOptions(createIfMissing: true), jsonEncoder: jsonEncoder, jsonDecoder: jsonDecoder), as: iso8601)
        let db = self.dbs.database(iso8601, logger: .init(label: "test"), on: self.dbs.eventLoopGroup.any())!

        try await EventMigration().prepare(on: db)
        do {
            let date = Date()
            let event = Event()
            event.id = 1
            event.metadata = Metadata(createdAt: date)
            try await event.save(on: db)

            let rows = try await EventStringlyTyped.query(on: db).filter(\.$id == 1).all()
            XCTAssertEqual(rows[0].metadata["createdAt"], ISO8601DateFormatter().string(from: date))
        } catch {
            try? await EventMigration().revert(on: db)
            throw error
        }
        try await EventMigration().revert(on: db)
    }

    var benchmarker: FluentBenchmarker { .init(databases: self.dbs) }
    var database: (any Database)!
    var dbs: Databases!
    var folder: EncryptedFolder!
    var otherFolder: EncryptedFolder!

    override class func setUp() {
        XCTAssert(isLoggingConfigured)
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        folder = try EncryptedFolder()
        self.dbs = Databases(threadPool: NIOThreadPool.singleton, on: MultiThreadedEventLoopGroup.singleton)
        self.dbs.use(.encryptedSQLite(path: folder.databasePath, keysFile: folder.keysPath,
                                      options: OpenOptions(createIfMissing: true, concurrentReaders: 2)), as: .sqlite)
        // FluentBenchmarker wants two databases registered (fluent-sqlite-driver's second is a file).
        otherFolder = try EncryptedFolder()
        self.dbs.use(.encryptedSQLite(path: otherFolder.databasePath, keysFile: otherFolder.keysPath,
                                      options: OpenOptions(createIfMissing: true)), as: .init(string: "benchmark"))
        self.database = self.dbs.database(.sqlite, logger: .init(label: "test.fluent.encrypted-sqlite"), on: MultiThreadedEventLoopGroup.singleton.any())
    }

    override func tearDown() async throws {
        await self.dbs.shutdownAsync()
        self.dbs = nil
        self.database = nil
        self.folder = nil
        self.otherFolder = nil
        try await super.tearDown()
    }
}
