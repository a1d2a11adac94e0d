import EncryptedSQLite
import FluentEncryptedSQLiteDriver
import FluentKit
import Foundation
import Logging
import NIOCore
import NIOPosix
import XCTest

/// A temporary folder holding an encrypted database and the Keys file that opens it: two raw
/// 256-bit keys made at runtime (the older one first), in a file only its owner may read. The key
/// bytes exist only in that file, never in the repository, logs or argv.
final class EncryptedFolder {
    let url: URL
    var databasePath: String { url.appendingPathComponent("test.sqlite").path }
    var keysPath: String { url.appendingPathComponent("Keys").path }

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("fluent-encrypted-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        func hexKey() -> String {
            var generator = SystemRandomNumberGenerator()
            return (0..<32).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max, using: &generator)) }.joined()
        }
        let text = """
            databases:
              - path: test.sqlite
                keys:
                  - id: test-old
                    hex: \(hexKey())
                  - id: test-current
                    hex: \(hexKey())

            """
        _ = FileManager.default.createFile(atPath: keysPath, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }
}

let isLoggingConfigured: Bool = {
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardOutput(label: label)
        handler.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0) } ?? .warning
        return handler
    }
    return true
}()

/// Skips the test when the linked SQLite lacks `feature`, naming it and its version; the dialect
/// is what reports the gap.
func skipUnlessSupported(_ feature: EncryptedSQLiteDialect.Feature) throws {
    let dialect = EncryptedSQLiteDialect()
    try XCTSkipUnless(dialect.supports(feature),
                      "\(feature.name) needs SQLite \(feature.since); the linked SQLCipher carries SQLite \(dialect.version)")
}

func XCTAssertThrowsErrorAsync<T>(
    _ expression: @autoclosure () async throws -> T,
    _ message: @autoclosure () -> String = "",
    file: StaticString = #filePath, line: UInt = #line,
    _ callback: (any Error) -> Void = { _ in }
) async {
    do {
        _ = try await expression()
        XCTAssertThrowsError({}(), message(), file: file, line: line, callback)
    } catch {
        XCTAssertThrowsError(try { throw error }(), message(), file: file, line: line, callback)
    }
}

func XCTAssertNoThrowAsync<T>(
    _ expression: @autoclosure () async throws -> T,
    _ message: @autoclosure () -> String = "",
    file: StaticString = #filePath, line: UInt = #line
) async {
    do {
        _ = try await expression()
    } catch {
        XCTAssertNoThrow(try { throw error }(), message(), file: file, line: line)
    }
}
