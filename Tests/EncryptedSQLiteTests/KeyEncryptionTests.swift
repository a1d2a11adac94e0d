import DurableFiles
import EncryptedSQLite
@testable import KeyConfiguration
import Foundation
import Testing
import TestSupport

/// A KEK the tests plug in through the protocol (as an app plugs in a KMS): a local KEK that
/// counts its calls.
final class CountingKEK: KeyEncryptionKey, @unchecked Sendable {
    let id: String
    private let inner: LocalKeyEncryptionKey
    private let lock = NSLock()
    private var counts = (wraps: 0, unwraps: 0)

    init(id: String) throws {
        self.id = id
        inner = LocalKeyEncryptionKey(id: id, key: DataKey.random())
    }

    var unwraps: Int { lock.withLock { counts.unwraps } }

    func wrap(_ dataKey: DataKey, context: KeyWrappingContext) throws -> [UInt8] {
        lock.withLock { counts.wraps += 1 }
        return try inner.wrap(dataKey, context: context)
    }

    func unwrap(_ wrapped: [UInt8], context: KeyWrappingContext) throws -> DataKey {
        lock.withLock { counts.unwraps += 1 }
        return try inner.unwrap(wrapped, context: context)
    }
}

/// The 64 hex digits of a data key, for the sqlcipher shell (tests only).
func hexDigits(of key: DataKey) -> String {
    key.withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() }
}

@Suite("Key-encryption keys and wrapped data keys", .ownThread)
struct KeyEncryptionTests {
    @Test("a local KEK wraps with a fresh nonce each time, and a value unwraps only in its own context")
    func localRoundTrip() throws {
        let kek = LocalKeyEncryptionKey(id: "kek-a", key: DataKey.random())
        let dataKey = DataKey.random()
        let context = KeyWrappingContext(dataKeyID: "d1", keyEncryptionKeyID: "kek-a")
        let first = try kek.wrap(dataKey, context: context)
        let second = try kek.wrap(dataKey, context: context)
        #expect(first.count == 60 && second.count == 60)
        #expect(first != second, "a fresh random nonce per wrap")
        #expect(hexDigits(of: try kek.unwrap(first, context: context)) == hexDigits(of: dataKey))
        #expect(hexDigits(of: try kek.unwrap(second, context: context)) == hexDigits(of: dataKey))
        for other in [KeyWrappingContext(dataKeyID: "d2", keyEncryptionKeyID: "kek-a"), KeyWrappingContext(dataKeyID: "d1", keyEncryptionKeyID: "kek-b")] {
            #expect(throws: KeyWrappingProblem.doesNotAuthenticate) { try kek.unwrap(first, context: other) }
        }
        let stranger = LocalKeyEncryptionKey(id: "kek-a", key: DataKey.random())
        #expect(throws: KeyWrappingProblem.doesNotAuthenticate) { try stranger.unwrap(first, context: context) }
        #expect(String(describing: dataKey) == "DataKey(<secret>)")
    }

    @Test("a passphrase KEK: the same passphrase and salt give the same KEK; another salt does not")
    func passphraseKEK() throws {
        let salt = (0..<16).map { UInt8($0) }
        let a = try LocalKeyEncryptionKey(id: "k", passphrase: "kek passphrase", salt: salt)
        let b = try LocalKeyEncryptionKey(id: "k", passphrase: "kek passphrase", salt: salt)
        let c = try LocalKeyEncryptionKey(id: "k", passphrase: "kek passphrase", salt: salt.reversed())
        let context = KeyWrappingContext(dataKeyID: "d", keyEncryptionKeyID: "k")
        let value = try a.wrap(DataKey.random(), context: context)
        _ = try b.unwrap(value, context: context)
        #expect(throws: KeyWrappingProblem.doesNotAuthenticate) { try c.unwrap(value, context: context) }
        #expect(throws: KeyWrappingProblem.saltNeeded) { try LocalKeyEncryptionKey(id: "k", passphrase: "p", salt: [1, 2, 3]) }
    }

    @Test("a database moved from a passphrase to a wrapped data key: the shell opens it with the data key as a raw key only; rows, user_version and application_id intact")
    func rotationToWrappedKey() throws {
        let directory = TemporaryDirectory("wrapped-rotation")
        let path = directory.file("app.sqlite")
        let old = TestKeys.passphrase("old")
        try Fixture.createWithShell(at: path, key: .passphrase(old), rows: 300)
        let before = try Fixture.digest(of: path, with: KeyList(database: path, keys: [DatabaseKey(id: "old", source: .passphrase(old))]))
        let kek = LocalKeyEncryptionKey(id: "kek-1", key: DataKey.random())
        let keks = KeyEncryptionKeyList([kek])
        let dataKey = DataKey.random()
        let wrapped = try keks.wrap(dataKey, dataKeyID: "data-1")
        let keys = try KeyList(database: path, keys: [
            DatabaseKey(id: "old", source: .passphrase(old)), DatabaseKey(id: "data-1", source: .wrapped(wrapped)),
        ], keyEncryptionKeys: keks)
        let database = try EncryptedDatabase(path: path, keys: keys)
        #expect(database.report.openedWithKeyID == "old" && database.report.isOnCurrentKey)
        #expect(try SQLCipherShell.opens(path, with: .hex(hexDigits(of: dataKey))))
        #expect(try !SQLCipherShell.opens(path, with: .passphrase(old)), "the old passphrase no longer opens the file")
        let check = try SQLCipherShell.run(path, key: .hex(hexDigits(of: dataKey)), "PRAGMA user_version; PRAGMA application_id; SELECT count(*) FROM people;")
        #expect(check.stdout == "42\n1234567\n300\n")
        #expect(try Fixture.digest(of: path, with: keys) == before)
    }

    @Test("a wrapped data key with non-default cipher settings (8 KiB pages) in WAL mode with a reader pool: rotation to it, then 4 pooled reads at once; the shell opens the file with the data key and those settings only")
    func wrappedKeyWithSettingsAndPool() throws {
        let directory = TemporaryDirectory("wrapped-pool")
        let path = directory.file("app.sqlite")
        let old = TestKeys.passphrase("old")
        try Fixture.createWithShell(at: path, key: .passphrase(old), rows: 120, walMode: true)
        let keks = KeyEncryptionKeyList([LocalKeyEncryptionKey(id: "kek-1", key: DataKey.random())])
        let dataKey = DataKey.random()
        let keys = try KeyList(database: path, keys: [
            DatabaseKey(id: "old", source: .passphrase(old)),
            DatabaseKey(id: "data-1", source: .wrapped(try keks.wrap(dataKey, dataKeyID: "data-1")), cipher: CipherSettings(pageSize: 8192)),
        ], keyEncryptionKeys: keks)
        let database = try EncryptedDatabase(path: path, keys: keys, options: OpenOptions(concurrentReaders: 4))
        #expect(database.report.isOnCurrentKey && database.report.rotated)
        let counts = Locked<[Int]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            let count = try? database.read { try $0.queryValue("SELECT count(*) FROM people", as: Int.self) }
            counts.withLock { $0.append(count ?? -1) }
        }
        #expect(counts.withLock { $0 } == [120, 120, 120, 120])
        let settings = "PRAGMA cipher_page_size = 8192;\n"
        let withSettings = try SQLCipherShell.run(path, key: nil, ShellKey.hex(hexDigits(of: dataKey)).pragma + "\n" + settings + "SELECT count(*) FROM people;")
        #expect(withSettings.stdout == "120\n", "\(withSettings.stderr)")
        #expect(try !SQLCipherShell.opens(path, with: .hex(hexDigits(of: dataKey))), "the default page size does not open it")
        #expect(try !SQLCipherShell.opens(path, with: .passphrase(old)))
    }

    @Test("an app's own KEK through the protocol (external: in the Keys file): each wrapped value is unwrapped once per loaded Keys file, however many databases share it")
    func externalKEKUnwrapsOnce() throws {
        let directory = TemporaryDirectory("external-kek")
        let kek = try CountingKEK(id: "kms")
        let keks = KeyEncryptionKeyList([kek])
        let shared = try keks.wrap(DataKey.random(), dataKeyID: "tenants-1")
        let own = try keks.wrap(DataKey.random(), dataKeyID: "solo-1")
        let text = """
            key_encryption_keys:
              - id: kms
                external: my-kms
            databases:
              - path: "tenants/*.sqlite"
                keys:
                  - id: tenants-1
                    wrapped_by: kms
                    wrapped_key: "\(shared.text)"
              - path: solo.sqlite
                keys:
                  - id: solo-1
                    wrapped_by: kms
                    wrapped_key: "\(own.text)"

            """
        _ = FileManager.default.createFile(atPath: directory.file("Keys"), contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        try FileManager.default.createDirectory(atPath: directory.file("tenants"), withIntermediateDirectories: false)
        let keysFile = try KeysFile.load(path: directory.file("Keys"), externalKeyEncryptionKeys: ["my-kms": kek])
        for index in 0..<20 {
            let path = directory.file("tenants/t\(index).sqlite")
            let database = try EncryptedDatabase(path: path, keys: keysFile.keyList(forDatabase: path), options: OpenOptions(createIfMissing: true))
            try database.write { try $0.execute("CREATE TABLE t(x); INSERT INTO t VALUES (\(index))") }
        }
        _ = try keysFile.keyList(forDatabase: directory.file("solo.sqlite"))
        _ = try keysFile.keyList(forDatabase: directory.file("solo.sqlite"))
        #expect(kek.unwraps == 2, "one unwrap per wrapped value: 20 tenant databases share one")
        // Without the app's KEK the entry cannot be used, and the error says what is missing.
        let bare = try KeysFile.load(path: directory.file("Keys"))
        let error = #expect(throws: KeyConfigurationError.self) { try bare.keyList(forDatabase: directory.file("solo.sqlite")) }
        #expect(error?.description.contains("no external key-encryption key named \"my-kms\"") == true, "\(String(describing: error))")
    }

    @Test("credential: reads $CREDENTIALS_DIRECTORY/<name>, as systemd gives a service")
    func credentialSource() throws {
        let directory = TemporaryDirectory("credential")
        let credentials = directory.file("credentials")
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let hex = TestKeys.hex()
        _ = FileManager.default.createFile(atPath: credentials + "/app-db", contents: Data((hex + "\n").utf8), attributes: [.posixPermissions: 0o400])
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: .hex(hex), rows: 20)
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "cred", source: .credential(name: "app-db", format: .hex))], environment: ["CREDENTIALS_DIRECTORY": credentials])
        let database = try EncryptedDatabase(path: path, keys: keys)
        #expect(try database.read { try $0.queryValue("SELECT count(*) FROM people", as: Int.self) } == 20)
        #expect(throws: KeyConfigurationError.credentialNameInvalid(keyID: "cred", database: path)) {
            try KeyList(database: path, keys: [DatabaseKey(id: "cred", source: .credential(name: "../app-db", format: .hex))], environment: ["CREDENTIALS_DIRECTORY": credentials])
        }
    }

    @Test("a passphrase KEK is derived once per process (a second KEK from the same passphrase and salt costs no PBKDF2); a hand-written Keys file entry loads and opens every database")
    func passphraseKEKOncePerProcess() throws {
        let directory = TemporaryDirectory("kek-file")
        // A salt no other test uses, so that the first derivation below is this test's own.
        let saltBytes = (0..<16).map { _ in UInt8.random(in: 0...255) }
        let salt = saltBytes.map { String(format: "%02x", $0) }.joined()
        let kekPassphrase = TestKeys.passphrase("kek")
        let clock = ContinuousClock()
        var kek: LocalKeyEncryptionKey?
        let first = try clock.measure { kek = try LocalKeyEncryptionKey(id: "kek-1", passphrase: KeyText(kekPassphrase), salt: saltBytes) }
        let second = try clock.measure { _ = try LocalKeyEncryptionKey(id: "kek-1", passphrase: KeyText(kekPassphrase), salt: saltBytes) }
        // 256,000 rounds of HMAC-SHA512 take tens of milliseconds at least; a kept key, microseconds.
        #expect(first > .milliseconds(10) && second * 20 < first, "first derivation \(first), second \(second)")
        let keks = KeyEncryptionKeyList([try #require(kek)])
        var entries = ""
        for index in 0..<5 {
            let path = directory.file("db\(index).sqlite")
            let dataKey = DataKey.random()
            try Fixture.createWithShell(at: path, key: .hex(hexDigits(of: dataKey)), rows: 5)
            let value = try keks.wrap(dataKey, dataKeyID: "d\(index)")
            entries += "  - path: db\(index).sqlite\n    keys:\n      - id: d\(index)\n        wrapped_by: kek-1\n        wrapped_key: \(value.text)\n"
        }
        let text = "key_encryption_keys:\n  - id: kek-1\n    passphrase: \"\(kekPassphrase)\"\n    salt: \(salt)\n    created: 2026-01-01\ndatabases:\n" + entries
        _ = FileManager.default.createFile(atPath: directory.file("Keys"), contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        let keysFile = try KeysFile.load(path: directory.file("Keys"))
        #expect(keysFile.keyEncryptionKeys.ids == ["kek-1"])
        #expect(keysFile.keyEncryptionKeyEntries.first?.description == "KeyEncryptionKeyEntry(id: \"kek-1\", source: passphrase, salted, created: 2026-01-01)")
        for index in 0..<5 {
            let path = directory.file("db\(index).sqlite")
            let database = try EncryptedDatabase(path: path, keys: keysFile.keyList(forDatabase: path))
            #expect(try database.read { try $0.queryValue("SELECT count(*) FROM people", as: Int.self) } == 5)
        }
        #expect(!String(describing: keysFile.keyEncryptionKeyEntries).contains(kekPassphrase))
    }

    @Test("the Key Managers article shows the Vault example's code as it is in Examples/VaultTransitKEK")
    func articleShowsTheExample() throws {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let article = try String(contentsOf: repository.appendingPathComponent("Sources/EncryptedSQLite/EncryptedSQLite.docc/KeyManagers.md"), encoding: .utf8)
        let source = try ["VaultTransitKEK.swift", "main.swift"].map {
            try String(contentsOf: repository.appendingPathComponent("Examples/VaultTransitKEK/\($0)"), encoding: .utf8)
        }.joined(separator: "\n")
        let blocks = article.components(separatedBy: "```swift\n").dropFirst().map { $0.components(separatedBy: "\n```")[0] }
        #expect(!blocks.isEmpty)
        for block in blocks { #expect(source.contains(block), "the article shows code that is not in the example:\n\(block)") }
    }
}

/// A KEK that fails to become ready (a token refusing the PIN) is asked once per loaded Keys
/// file, not once per database: a real token locks its PIN after a few wrong ones.
@Suite("Key-encryption keys: a failure is kept", .ownThread)
struct KeyEncryptionFailureTests {
    @Test("a KEK whose source fails is tried once; every database of the list gets the same error")
    func failureIsKept() throws {
        let attempts = Locked(0)
        let failing = KeyEncryptionKeyList(slots: [.init(id: "hsm", source: "test") { (_) throws(KeyConfigurationError) -> any KeyEncryptionKey in
            attempts.withLock { $0 += 1 }
            throw .keyEncryptionKeyUnavailable(keyEncryptionKeyID: "hsm", source: "test", problem: .keyManager("refused the user PIN"))
        }])
        let value = WrappedDataKey(bytes: Array(repeating: 1, count: 60), wrappedBy: "hsm")
        for database in ["a", "b", "c"] {
            #expect(throws: KeyConfigurationError.self) {
                try KeyList(database: database, keys: [DatabaseKey(id: "d", source: .wrapped(value))], keyEncryptionKeys: failing)
            }
        }
        #expect(attempts.withLock { $0 } == 1)
    }
}
