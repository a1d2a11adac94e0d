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
    /// The keys' ids and hex, oldest first: `test-old`, `test-current`, then any ``appendKey(_:)`` added.
    private(set) var keys: [(id: String, hex: String)]

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("fluent-encrypted-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        keys = [("test-old", Self.hexKey()), ("test-current", Self.hexKey())]
        try writeKeysFile()
    }

    static func hexKey() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max, using: &generator)) }.joined()
    }

    /// The key `id`'s entry for a `KeyList` (as the Keys file gives it).
    func key(_ id: String) -> DatabaseKey {
        DatabaseKey(id: id, source: .hex(KeyText(keys.first { $0.id == id }!.hex)))
    }

    /// Appends a new key (the current one from now on) to the Keys file, replacing it atomically,
    /// as an operator does before running `rekey`.
    func appendKey(_ id: String) throws {
        keys.append((id, Self.hexKey()))
        try writeKeysFile()
    }

    /// The Keys file with every key, written to a temporary name and renamed over the old one.
    private func writeKeysFile() throws {
        let entries = keys.map { "      - id: \($0.id)\n        hex: \($0.hex)\n" }.joined()
        let text = "databases:\n  - path: test.sqlite\n    keys:\n" + entries
        let temporary = keysPath + ".new"
        guard FileManager.default.createFile(atPath: temporary, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw CocoaError(.fileWriteUnknown)
        }
        guard rename(temporary, keysPath) == 0 else { throw CocoaError(.fileWriteUnknown) }
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
