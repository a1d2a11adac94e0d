import Foundation
import Testing
import TestSupport

@Suite("rekey: SQLCipher 2.0 beta files, in a process of their own", .ownThread)
struct LegacyBetaCLITests {
    @Test("a SQLCipher 2.0 beta file (fast_kdf_iter 4000, HMAC salt mask 00) is rotated to the current key by legacy: true (found by the page layer, not by changing the process-wide mask on the way) and by its explicit settings; a wrong legacy key changes nothing",
          arguments: ["legacy", "explicit"])
    func betaFile(_ how: String) throws {
        let directory = TemporaryDirectory("beta")
        let ring = TestKeyring([.passphrase, .hex, .passphrase], in: directory)
        let path = directory.file("app.sqlite")
        let pragmas = "PRAGMA cipher_compatibility = 2; PRAGMA kdf_iter = 4000; PRAGMA fast_kdf_iter = 4000; PRAGMA cipher_hmac_salt_mask = \"x'00'\";\n"
        let made = try SQLCipherShell.run(path, key: ring.keys[0].shellKey, pragmas + Fixture.sql(rows: 40))
        #expect(made.status == 0, "\(made.stderr)")
        let passphrase = ring.keys[0].secret
        let hex = ring.keys[1].secret
        func keys(_ cipher: String, passphrase: String = passphrase) -> String {
            "databases:\n  - path: app.sqlite\n    keys:\n      - id: beta\n        passphrase: \"\(passphrase)\"\n\(cipher)      - id: now\n        hex: \"\(hex)\"\n"
        }
        // A legacy key that is not the file's: nothing opens, nothing changes.
        _ = FileManager.default.createFile(atPath: directory.file("Wrong"), contents: Data(keys("        legacy: true\n", passphrase: ring.keys[2].secret).utf8),
                                           attributes: [.posixPermissions: 0o600])
        let snapshot = FileSnapshot(path)
        let refused = try RekeyCLI.run(["--db", "app.sqlite", "--keys", "Wrong"], in: directory)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("none of the configured keys"), "\(refused.stderr)")
        #expect(FileSnapshot(path) == snapshot)

        let beta = how == "legacy" ? "        legacy: true\n" : "        cipher: {compatibility: 2, fast_kdf_iter: 4000, hmac_salt_mask: \"00\"}\n"
        _ = FileManager.default.createFile(atPath: directory.file("Keys"), contents: Data(keys(beta).utf8), attributes: [.posixPermissions: 0o600])
        let rotated = try RekeyCLI.run(["--db", "app.sqlite", "--keys", "Keys"], in: directory)
        #expect(rotated.status == 0, "\(rotated.stderr)")
        #expect(rotated.stdout.hasPrefix("app.sqlite: opened with key \"beta\", rewritten for \"now\""))
        let shell = try SQLCipherShell.run(path, key: ring.keys[1].shellKey, "PRAGMA user_version; PRAGMA application_id; SELECT count(*) FROM people; PRAGMA integrity_check;")
        #expect(shell.stdout == "42\n1234567\n40\nok\n")
        for output in [refused.stdout, refused.stderr, rotated.stdout, rotated.stderr] { #expect(!output.contains(passphrase) && !output.contains(hex)) }
        #expect(try !SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
    }
}
