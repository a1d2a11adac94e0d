@testable import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// The public calls a new user reaches for first: the options' initializer, the async rotation,
/// and what a background rotation's report says, each checked on a real file made by the shell.
@Suite("Open options and the rotation calls, as a new user writes them")
struct OpenOptionsAndRotationAPITests {
    @Test("OpenOptions(backgroundRotation: true) rotates in the background; with rotateToCurrentKey: false nothing rotates")
    func backgroundRotationFromTheInitializer() async throws {
        let directory = TemporaryDirectory("options")
        let ring = TestKeyring([.passphrase, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 300)
        let digest = try Fixture.digest(of: path, with: ring.only(0, database: path))
        let size = try #require(FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)

        // rotateToCurrentKey off wins over backgroundRotation: the file stays on k1.
        do {
            let database = try EncryptedDatabase(
                path: path, keys: ring.keyList(database: path), options: OpenOptions(rotateToCurrentKey: false, backgroundRotation: true))
            #expect(database.report.openedWithKeyID == "k1")
            #expect(database.backgroundRotation == nil, "rotateToCurrentKey: false must start no background rotation")
        }
        #expect(try SQLCipherShell.opens(path, with: ring.keys[0].shellKey), "the file must still be on k1")

        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: OpenOptions(backgroundRotation: true))
        let rotation = try #require(database.backgroundRotation, "OpenOptions(backgroundRotation: true) must start a background rotation")
        let report = try await rotation.result()
        #expect(report.method == .backgroundCopy)
        #expect(report.toKeyID == "k2")
        // `bytes` is the database's size, as for every other rotation; the copy's is in the figures.
        #expect(report.bytes == Int64(size), "bytes \(report.bytes), the file had \(size)")
        #expect((report.background?.temporaryBytes ?? 0) > 0)
        #expect(try await database.read { try Fixture.contentDigest($0) } == digest)
        #expect(try SQLCipherShell.opens(path, with: ring.keys[1].shellKey), "the new key must open the file")
        #expect(try !SQLCipherShell.opens(path, with: ring.keys[0].shellKey), "the old key must no longer open the file")
    }

    @Test("try await rotateToCurrentKey() rotates the file, and the old key no longer opens it")
    func asyncRotation() async throws {
        let directory = TemporaryDirectory("async-rotation")
        let ring = TestKeyring([.hex, .passphrase], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 300, walMode: true)
        let digest = try Fixture.digest(of: path, with: ring.only(0, database: path))
        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: OpenOptions(rotateToCurrentKey: false))
        #expect(database.report.openedWithKeyID == "k1")
        let rotation = try #require(try await database.rotateToCurrentKey(), "the file was on k1: a rotation must run")
        #expect(rotation.fromKeyID == "k1" && rotation.toKeyID == "k2")
        #expect(database.report.rotation == rotation)
        #expect(try await database.rotateToCurrentKey() == nil, "a second call finds the file on the current key")
        #expect(try await database.read { try Fixture.contentDigest($0) } == digest)
        #expect(try SQLCipherShell.opens(path, with: ring.keys[1].shellKey))
        #expect(try !SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
    }
}
