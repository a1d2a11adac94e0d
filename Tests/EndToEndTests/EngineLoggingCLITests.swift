import Foundation
import Testing
import TestSupport

@Suite("rekey: the engine's own logging stays off the user's terminal", .ownThread)
struct EngineLoggingCLITests {
    @Test("keys that do not fit (the current key first, then an old one) print nothing of SQLCipher's own on stderr; SQLCipher 4 would print 3 lines per wrong key")
    func wrongKeysPrintNothing() throws {
        let fixture = try CLIFixture(kinds: [.passphrase, .hex, .passphrase], madeWith: 0)
        let status = try fixture.rekey(["status", "--db", "app.sqlite"])
        #expect(status.status == 0, "\(status.stderr)")
        let rotation = try fixture.rekey(["--db", "app.sqlite"])
        #expect(rotation.status == 0, "\(rotation.stderr)")
        #expect(rotation.stdout.hasPrefix("app.sqlite: opened with key \"k1\", rotated to \"k3\""))
        // No key fits at all: the library's own error, nothing of the engine's.
        let others = TestKeyring([.passphrase, .hex], in: fixture.directory, idPrefix: "s")
        _ = FileManager.default.createFile(atPath: fixture.directory.file("Strangers"), contents: Data(others.yaml(databasePath: "app.sqlite").utf8), attributes: [.posixPermissions: 0o600])
        let strangers = try fixture.rekey(["--db", "app.sqlite", "--keys", "Strangers"], environment: others.environment)
        #expect(strangers.status != 0)
        #expect(strangers.stderr.contains("none of the configured keys opens this file") || strangers.stdout.contains("none of the configured keys opens this file"))
        for output in [status.stderr, rotation.stderr, strangers.stderr] {
            #expect(!output.contains("ERROR CORE"), "\(output)")
            #expect(!output.contains("hmac check failed"), "\(output)")
            #expect(!output.contains("sqlcipher"), "\(output)")
        }
    }
}
