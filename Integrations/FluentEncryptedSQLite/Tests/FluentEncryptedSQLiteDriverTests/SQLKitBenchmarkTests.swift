import EncryptedSQLite
import FluentEncryptedSQLiteDriver
import SQLKit
import SQLKitBenchmark
import XCTest

/// SQLKitBenchmark's suite against ``EncryptedSQLDatabase`` on a real encrypted file, one test
/// per part so that a part the linked SQLite cannot run is skipped alone, naming the feature.
final class SQLKitBenchmarkTests: XCTestCase {
    var folder: EncryptedFolder!
    var database: EncryptedDatabase!
    var sql: EncryptedSQLDatabase!

    override class func setUp() {
        XCTAssert(isLoggingConfigured)
    }

    override func setUpWithError() throws {
        folder = try EncryptedFolder()
        database = try EncryptedDatabase(path: folder.databasePath, keysFile: folder.keysPath, options: OpenOptions(createIfMissing: true, concurrentReaders: 2))
        sql = EncryptedSQLDatabase(database: database)
    }

    override func tearDown() async throws {
        await database?.close()
        (sql, database, folder) = (nil, nil, nil)
    }

    var benchmarker: SQLBenchmarker { SQLBenchmarker(on: sql) }

    func testPlanets() async throws { try await benchmarker.testPlanets() }
    func testCodable() async throws { try await benchmarker.testCodable() }
    func testEnum() async throws { try await benchmarker.testEnum() }
    func testUpserts() async throws {
        try skipUnlessSupported(.upsert)
        try await benchmarker.testUpserts()
    }
    func testUnions() async throws { try await benchmarker.testUnions() }
    func testJSONPaths() async throws {
        try skipUnlessSupported(.jsonFunctions)
        try await benchmarker.testJSONPaths()
    }
}
