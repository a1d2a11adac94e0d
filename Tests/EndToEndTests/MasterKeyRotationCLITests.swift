import EncryptedSQLite
import Foundation
import Testing
import TestSupport

@Suite("rekey: wrapped data keys and master-key rotation (keys new --wrapped, keys rewrap, retire-check --kek)", .ownThread)
struct MasterKeyRotationCLITests {
    @Test("passphrase databases → a wrapped data key → rekey --all → rewrap to a new KEK (no database byte changes) → retire the old KEK → everything opens")
    func lifecycle() throws {
        let directory = TemporaryDirectory("master-key")
        let oldPassphrase = TestKeys.passphrase("db")
        let kekPassphrase = TestKeys.passphrase("kek")
        let keysText = """
            # Comments and layout survive every edit.
            key_encryption_keys:
              - id: kek-1                 # the first master key
                passphrase: "\(kekPassphrase)"
                salt: 0f1e2d3c4b5a69788796a5b4c3d2e1f0

            databases:
              - path: "data/*.sqlite"
                keys:
                  - id: p1
                    passphrase: "\(oldPassphrase)"

            """
        _ = FileManager.default.createFile(atPath: directory.file("Keys"), contents: Data(keysText.utf8), attributes: [.posixPermissions: 0o600])
        try FileManager.default.createDirectory(atPath: directory.file("data"), withIntermediateDirectories: false)
        let names = ["a", "b", "c"]
        for name in names {
            try Fixture.createWithShell(at: directory.file("data/\(name).sqlite"), key: .passphrase(oldPassphrase), rows: 60, walMode: name == "c")
        }
        let digests = try names.map { try Fixture.digest(of: directory.file("data/\($0).sqlite"), with: KeyList(database: $0, keys: [DatabaseKey(id: "p1", source: .passphrase(oldPassphrase))])) }
        let transcript = RekeyTranscript(in: directory, secrets: [oldPassphrase, kekPassphrase])
        defer { print("master-key transcript:\n" + transcript.text) }
        func dataKeys() throws -> [String: String] {
            let file = try KeysFile.load(path: directory.file("Keys"))
            var keys: [String: String] = [:]
            for entry in file.entries {
                for key in entry.keys {
                    guard case .wrapped(let value) = key.source else { continue }
                    keys[key.id] = try file.keyEncryptionKeys.unwrap(value, dataKeyID: key.id, database: entry.configuredPath).withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() }
                }
            }
            return keys
        }
        func databaseBytes() throws -> [Data] { try names.map { try Data(contentsOf: URL(fileURLWithPath: directory.file("data/\($0).sqlite"))) } }

        // A new data key, wrapped by kek-1; no key file.
        let made = try transcript.rekey(["keys", "new", "--for", "data/*.sqlite", "--id", "d1", "--wrapped"], expect: 0)
        #expect(made.stdout.hasSuffix("; rotate with: rekey --keys Keys --all\n"), "\(made.stdout)")
        #expect(!FileManager.default.fileExists(atPath: directory.file("d1.key")))
        let d1 = try #require(try dataKeys()["d1"])
        #expect(try String(contentsOfFile: directory.file("Keys"), encoding: .utf8).hasPrefix("# Comments and layout survive every edit.\n"))

        // An ordinary rotation moves every database to it.
        _ = try transcript.rekey(["--all"], expect: 0)
        for (name, digest) in zip(names, digests) {
            let path = directory.file("data/\(name).sqlite")
            #expect(try SQLCipherShell.opens(path, with: .hex(d1)), "\(name) opens with the data key")
            #expect(try !SQLCipherShell.opens(path, with: .passphrase(oldPassphrase)), "\(name): the old passphrase fails")
            #expect(try SQLCipherShell.run(path, key: .hex(d1), "PRAGMA user_version; PRAGMA application_id;").stdout == "42\n1234567\n")
            #expect(try Fixture.digest(of: path, with: KeyList(database: name, keys: [DatabaseKey(id: "d1", source: .hex(d1))])) == digest)
        }

        // Master-key rotation: a new KEK, every data key rewrapped, no database touched.
        let bytesBefore = try databaseBytes()
        let keysBefore = try String(contentsOfFile: directory.file("Keys"), encoding: .utf8)
        let rewrap = try transcript.rekey(["keys", "rewrap", "--new-kek", "kek-2", "--json"], expect: 0)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(rewrap.stdout.utf8)) as? [String: Any])
        #expect(report["rewrapped"] as? Int == 1 && report["keyEncryptionKeyID"] as? String == "kek-2")
        #expect(try databaseBytes() == bytesBefore, "no database byte changed")
        #expect(FileSystemMode.of(directory.file("kek-2.key")) == 0o600)
        let keysAfter = try String(contentsOfFile: directory.file("Keys"), encoding: .utf8)
        #expect(keysAfter != keysBefore && keysAfter.contains("wrapped_by: \"kek-2\"") && !keysAfter.contains("wrapped_by: \"kek-1\""))
        #expect(keysAfter.contains("  - id: kek-1                 # the first master key"))
        #expect(try dataKeys()["d1"] == d1, "the data key is the same, only its wrapping changed")

        // kek-1 can go; kek-2 is current.
        _ = try transcript.rekey(["keys", "retire-check", "--kek", "kek-1"], expect: 0)
        let current = try transcript.rekey(["keys", "retire-check", "--kek", "kek-2"], expect: 3)
        #expect(current.stdout.contains("CURRENT key-encryption key"))
        let withoutOld = keysAfter.replacingOccurrences(of: "  - id: kek-1                 # the first master key\n    passphrase: \"\(kekPassphrase)\"\n    salt: 0f1e2d3c4b5a69788796a5b4c3d2e1f0\n", with: "")
        #expect(withoutOld != keysAfter)
        try withoutOld.write(toFile: directory.file("Keys"), atomically: true, encoding: .utf8)
        chmod(directory.file("Keys"), 0o600)
        _ = try transcript.rekey(["--check", "--all"], expect: 0)
        for (name, digest) in zip(names, digests) {
            let path = directory.file("data/\(name).sqlite")
            let keys = try KeysFile.load(path: directory.file("Keys")).keyList(forDatabase: path)
            #expect(try Fixture.digest(of: path, with: keys) == digest)
        }
    }

    @Test("refusals change nothing: a tampered wrapped value, a --to that is not listed, --wrapped without a KEK")
    func refusals() throws {
        let directory = TemporaryDirectory("master-key-refusals")
        let kekHex = TestKeys.hex()
        let realKEK = LocalKeyEncryptionKey(id: "kek-1", key: try DataKey(copying: Array(stride(from: 0, to: 64, by: 2).map { UInt8(kekHex.dropFirst($0).prefix(2), radix: 16)! })))
        var bytes = try realKEK.wrap(DataKey.random(), context: KeyWrappingContext(dataKeyID: "d1", keyEncryptionKeyID: "kek-1"))
        bytes[30] ^= 0x40
        let tampered = WrappedDataKey(bytes: bytes, wrappedBy: "kek-1")
        let text = "key_encryption_keys:\n  - id: kek-1\n    hex: \(kekHex)\ndatabases:\n  - path: app.sqlite\n    keys:\n      - id: d1\n        wrapped_by: kek-1\n        wrapped_key: \"\(tampered.text)\"\n"
        _ = FileManager.default.createFile(atPath: directory.file("Keys"), contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        let before = FolderSnapshot(directory.path)
        let rewrap = try RekeyCLI.run(["keys", "rewrap", "--new-kek", "kek-2"], in: directory)
        #expect(rewrap.status == 78, "\(rewrap.stderr)")
        #expect(rewrap.stderr.contains("key \"d1\" could not be unwrapped with key-encryption key \"kek-1\""), "\(rewrap.stderr)")
        #expect(FolderSnapshot(directory.path) == before, "no new KEK file, the Keys file unchanged")
        let notListed = try RekeyCLI.run(["keys", "rewrap", "--to", "kek-9"], in: directory)
        #expect(notListed.status == 78 && FolderSnapshot(directory.path) == before, "\(notListed.stderr)")

        let plain = TemporaryDirectory("master-key-no-kek")
        _ = FileManager.default.createFile(atPath: plain.file("Keys"), contents: Data("databases:\n  - path: app.sqlite\n    keys:\n      - id: p\n        passphrase: \"x y z\"\n".utf8), attributes: [.posixPermissions: 0o600])
        let plainBefore = FolderSnapshot(plain.path)
        let wrapped = try RekeyCLI.run(["keys", "new", "--for", "app.sqlite", "--wrapped"], in: plain)
        #expect(wrapped.status == 78 && wrapped.stderr.contains("key_encryption_keys"), "\(wrapped.stderr)")
        #expect(FolderSnapshot(plain.path) == plainBefore)
    }

    @Test("no KEK, data key or KEK passphrase in any output, written file name or process argument list of keys new --wrapped, --all, keys rewrap, retire-check --kek (text, --json, --verbose, failures)")
    func secrets() throws {
        let directory = TemporaryDirectory("master-key-secrets")
        let kekPassphrase = TestKeys.passphrase("kek-secret")
        let dbPassphrase = TestKeys.passphrase("db-secret")
        let text = "key_encryption_keys:\n  - id: kek-1\n    passphrase: \"\(kekPassphrase)\"\n    salt: 00112233445566778899aabbccddeeff\ndatabases:\n  - path: app.sqlite\n    keys:\n      - id: p1\n        passphrase: \"\(dbPassphrase)\"\n"
        _ = FileManager.default.createFile(atPath: directory.file("Keys"), contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        try Fixture.createWithShell(at: directory.file("app.sqlite"), key: .passphrase(dbPassphrase), rows: 10)
        let watcher = ProcessListWatcher(secrets: [kekPassphrase, dbPassphrase])
        var outputs: [String] = []
        for arguments in [
            ["keys", "new", "--for", "app.sqlite", "--wrapped", "--id", "d1", "--json"], ["--db", "app.sqlite", "--verbose"],
            ["keys", "rewrap", "--new-kek", "kek-2", "--verbose"], ["keys", "rewrap", "--json"], ["keys", "retire-check", "--kek", "kek-1", "--json"],
            ["keys", "rewrap", "--to", "kek-9"], ["keys", "new", "--for", "app.sqlite", "--wrapped", "--id", "d1"], ["status", "--db", "app.sqlite", "--verbose"],
        ] {
            let result = try RekeyCLI.run(arguments, in: directory)
            #expect(result.status < 128, "rekey \(arguments) crashed: \(result.stderr)")
            outputs.append(result.stdout + result.stderr)
        }
        let (leaks, _, _) = watcher.stop()
        #expect(leaks.isEmpty, "a secret in a process's arguments: \(leaks)")
        let keysFile = try KeysFile.load(path: directory.file("Keys"))
        guard case .wrapped(let value) = keysFile.entries[0].keys.last?.source else { Issue.record("d1 is not wrapped"); return }
        let dataKey = try keysFile.keyEncryptionKeys.unwrap(value, dataKeyID: "d1", database: "app.sqlite").withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() }
        let kek2 = try Data(contentsOf: URL(fileURLWithPath: directory.file("kek-2.key"))).map { String(format: "%02x", $0) }.joined()
        let secrets = [kekPassphrase, dbPassphrase, dataKey, kek2]
        for output in outputs {
            #expect(SecretScan.leaks(of: secrets, in: output).isEmpty, "a secret in the output: \(output.prefix(2000))")
        }
        #expect(SecretScan.leaks(of: [dataKey, kek2], in: try Data(contentsOf: URL(fileURLWithPath: directory.file("Keys")))).isEmpty, "the Keys file holds no data key or KEK in clear")
    }
}
