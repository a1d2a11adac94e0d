import EncryptedSQLite
import Foundation
import KeyConfiguration
import Testing
import TestSupport

/// A KEK delivered as a systemd credential: encrypted with `systemd-creds encrypt --with-key=host`
/// (no TPM, no systemd as PID 1 needed), decrypted into a `$CREDENTIALS_DIRECTORY` laid out as
/// systemd lays it out for a service (folder 0700, file 0400), and read by a `credential:` KEK.
@Suite("systemd credentials as key-encryption keys", .enabled(if: SystemdCreds.testsEnabled, "systemd-creds is not installed (package systemd; scripts/setup.sh installs it)"), .ownThread)
struct SystemdCredentialTests {

    let directory = TemporaryDirectory("credentials")

    /// `systemd-creds` with `arguments` (paths and names only); fails the test with its output otherwise.
    func systemdCreds(_ arguments: [String]) throws {
        let tool = try #require(SystemdCreds.tool, "systemd-creds is not installed; run scripts/setup.sh")
        let result = try ProcessRunner.run(tool, arguments)
        #expect(result.status == 0, "systemd-creds \(arguments.first ?? ""): \(result.stderr)")
    }

    @Test("a KEK encrypted with systemd-creds and decrypted into CREDENTIALS_DIRECTORY unwraps the data key of a database that opens, from the library and from rekey")
    func credentialKEK() throws {
        let kekBytes = (0..<32).map { _ in UInt8.random(in: 0...255) }
        let plainKEK = directory.file("kek.bin")
        _ = FileManager.default.createFile(atPath: plainKEK, contents: Data(kekBytes), attributes: [.posixPermissions: 0o600])
        let sealed = directory.file("app-kek.cred")
        try systemdCreds(["encrypt", "--with-key=host", "--name=app-kek", plainKEK, sealed])
        try FileManager.default.removeItem(atPath: plainKEK)
        #expect(try Data(contentsOf: URL(fileURLWithPath: sealed)).range(of: Data(kekBytes)) == nil)

        // What systemd does for LoadCredentialEncrypted=app-kek:<sealed>: a private folder, a read-only file.
        let credentials = directory.file("credentials")
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        try systemdCreds(["decrypt", "--name=app-kek", sealed, credentials + "/app-kek"])
        chmod(credentials + "/app-kek", 0o400)
        #expect(try Data(contentsOf: URL(fileURLWithPath: credentials + "/app-kek")) == Data(kekBytes))

        let kek = LocalKeyEncryptionKey(id: "kek-cred", key: try DataKey(copying: kekBytes))
        let wrapped = try KeyEncryptionKeyList([kek]).wrap(DataKey.random(), dataKeyID: "data-1")
        let keysFile = directory.file("Keys")
        try """
        key_encryption_keys:
          - id: kek-cred
            credential: app-kek
            format: binary
        databases:
          - path: app.sqlite
            keys:
              - id: data-1
                wrapped_by: kek-cred
                wrapped_key: \(wrapped.text)

        """.write(toFile: keysFile, atomically: false, encoding: .utf8)
        chmod(keysFile, 0o600)
        let database = directory.file("app.sqlite")
        let environment = ["CREDENTIALS_DIRECTORY": credentials]
        do {
            let keys = try KeysFile.load(path: keysFile).keyList(forDatabase: database, environment: environment)
            let opened = try EncryptedDatabase(path: database, keys: keys, options: OpenOptions(createIfMissing: true))
            try opened.write { db in
                try db.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT)")
                try db.execute("INSERT INTO notes(text) VALUES ('from a credential')")
            }
        }
        let keys = try KeysFile.load(path: keysFile).keyList(forDatabase: database, environment: environment)
        let reopened = try EncryptedDatabase(path: database, keys: keys)
        #expect(reopened.report.openedWithKeyID == "data-1")
        #expect(try reopened.read { try $0.query("SELECT text FROM notes").first?.get("text", as: String.self) } == "from a credential")

        var child = ProcessInfo.processInfo.environment
        child["CREDENTIALS_DIRECTORY"] = credentials
        let check = try ProcessRunner.run(RekeyCLI.path, ["--db", database, "--keys", keysFile, "--check"], environment: child)
        #expect(check.status == 0, "\(check.stderr)")

        // Outside a service (no CREDENTIALS_DIRECTORY) the KEK is unavailable, and the error says why.
        child["CREDENTIALS_DIRECTORY"] = nil
        let outside = try ProcessRunner.run(RekeyCLI.path, ["--db", database, "--keys", keysFile, "--check"], environment: child)
        #expect(outside.status != 0 && outside.stderr.contains("CREDENTIALS_DIRECTORY is not set"), "\(outside.stderr)")
    }
}

/// systemd's credential tool: the tests run when it is installed, and always under CI (where a
/// missing tool fails them).
enum SystemdCreds {
    static let tool = ProcessRunner.which("systemd-creds")
    static var testsEnabled: Bool { tool != nil || ProcessInfo.processInfo.environment["CI"] == "true" }
}
