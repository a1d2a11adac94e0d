import EncryptedSQLite
import Foundation
import Testing
import TestSupport

@Suite("Database health")
struct DatabaseHealthTests {
    let directory = TemporaryDirectory("health")

    @Test("a sound file: its key and format, not needing rotation, journal and sizes, every page authenticates; a flipped byte in a page is found")
    func health() throws {
        let ring = TestKeyring([.passphrase, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[1].shellKey, rows: 400)
        let keys = try ring.keyList(database: path)
        let health = try DatabaseHealth.check(path: path, keys: keys, maximumKeyAgeDays: 30)
        #expect(health.keyID == "k2" && !health.needsRotation)
        #expect(health.format == (SQLCipherEngine.linked.major >= 4 ? "kdf_iter 256000 (sha512), page_size 4096, hmac sha512" : "kdf_iter 64000 (sha1), page_size 1024, hmac sha1"))
        #expect(health.journalMode == "delete" && health.walBytes == 0)
        #expect(health.bytes == FileSystemProbe.size(of: path))
        #expect(health.integrity == .ok, "\(health.integrityDetail ?? "")")
        #expect(health.integrityMethod == (SQLCipherEngine.linked.major >= 4 ? "cipher_integrity_check" : "page HMACs"))
        #expect(health.currentKeyAgeDays == nil && !health.keyTooOld, "no created: date, no age")

        // One byte of page 5's ciphertext changed: that page no longer authenticates.
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        try handle.seek(toOffset: UInt64(4 * 1024 + 100))
        let byte = try #require(try handle.read(upToCount: 1)).first ?? 0
        try handle.seek(toOffset: UInt64(4 * 1024 + 100))
        try handle.write(contentsOf: Data([byte ^ 0x01]))
        try handle.close()
        let damaged = try DatabaseHealth.check(path: path, keys: keys)
        #expect(damaged.integrity == .failed)
        if SQLCipherEngine.linked.major < 4 { #expect(damaged.integrityDetail?.contains("page 5") == true, "\(damaged.integrityDetail ?? "")") }
        let encoded = String(decoding: try JSONEncoder().encode(damaged), as: UTF8.self)
        #expect(!encoded.contains(ring.keys[1].secret) && !encoded.contains(ring.keys[0].secret))
    }

    @Test("an old key: needs rotation; key age against the policy")
    func oldKeyAndAge() throws {
        let ring = TestKeyring([.passphrase, .hex], in: directory)
        let path = directory.file("old.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 10, walMode: true)
        let created = try #require(ISO8601DateFormatter().date(from: "2026-01-01T00:00:00Z"))
        let keys = try KeyList(database: path, keys: [ring.keys[0].key, DatabaseKey(id: "k2", source: ring.keys[1].key.source, created: created)], environment: ring.environment)
        let now = try #require(ISO8601DateFormatter().date(from: "2026-03-02T12:00:00Z"))
        let health = try DatabaseHealth.check(path: path, keys: keys, maximumKeyAgeDays: 30, now: now)
        #expect(health.keyID == "k1" && health.needsRotation && health.currentKeyID == "k2")
        #expect(health.journalMode == "wal")
        #expect(health.currentKeyCreated == "2026-01-01" && health.currentKeyAgeDays == 60 && health.keyTooOld)
        #expect(!(try DatabaseHealth.check(path: path, keys: keys, maximumKeyAgeDays: 60, now: now)).keyTooOld, "60 days is within a 60-day policy")
    }
}
