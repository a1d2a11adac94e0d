import EncryptedSQLite
import Foundation
import Testing
import TestSupport

extension BadInputCase: CustomTestStringConvertible {}

/// One command-line bad input: a folder with a Keys file for `app.sqlite` (see ``BadInputContext``).
typealias CLIMatrixContext = BadInputContext

extension BadInputContext {
    /// Runs `rekey` with the ring's environment (or `environment`), as root or through a shell prefix.
    func run(_ arguments: [String], environment: [String: String]? = nil, prefix: String? = nil) throws -> ProcessResult {
        let environment = environment ?? ring.environment
        if let prefix { return try RekeyCLI.runWrapped(prefix, arguments, in: directory, environment: environment) }
        return try RekeyCLI.run(arguments, in: directory, environment: environment)
    }

    /// The usual case: snapshot the database (and `also`), run, report.
    func runCase(_ arguments: [String], environment: [String: String]? = nil, prefix: String? = nil, mustName: [String], also: [String] = []) throws -> CLIMatrixOutcome {
        let before = ([db] + also).map { ($0, FileSnapshot($0)) }
        let result = try run(arguments, environment: environment, prefix: prefix)
        return CLIMatrixOutcome(result: result, mustName: mustName, unchanged: before)
    }

    /// A database made with key `index` and changed by `prepare` (its owner or mode), rotated by
    /// `rekey` running as nobody.
    func asNobodyCase(key index: Int, mustName: [String] = ["app.sqlite"], _ prepare: () -> Void) throws -> CLIMatrixOutcome {
        guard Self.canRunAsNobody else { return .skip("needs root and setpriv to run as nobody") }
        try makeDatabase(key: index)
        prepare()
        // The Keys file holds key material: nobody's own, readable by nobody else.
        chown(directory.file("Keys"), OtherUser.nobody, OtherUser.nobody)
        chmod(directory.file("Keys"), 0o600)
        return try runCase(["--db", "app.sqlite"], prefix: Self.asNobody, mustName: mustName)
    }

    /// The ring's Keys file for `app.sqlite` with a PKCS#11 KEK `hsm` listed first, its `pkcs11:`
    /// fields ending with `pinLines` (6-space indented).
    func pkcs11KeysFile(pinLines: String) -> String {
        "key_encryption_keys:\n  - id: hsm\n    pkcs11:\n      module: /usr/lib/softhsm/libsofthsm2.so\n      token: app\n      key: kek\n"
            + pinLines + ring.yaml(databasePath: "app.sqlite")
    }

    static let asNobody = OtherUser.commandPrefix
    static var canRunAsNobody: Bool { OtherUser.canRunCommands }
}

struct CLIMatrixOutcome {
    var result: ProcessResult?
    var mustName: [String]
    var unchanged: [(path: String, before: FileSnapshot)]
    var skipped: String?

    static func skip(_ reason: String) -> CLIMatrixOutcome { CLIMatrixOutcome(result: nil, mustName: [], unchanged: [], skipped: reason) }
}

/// The command-line cases of ``BadInputCatalog``, by id.
let cliMatrixCases: [String: @Sendable (CLIMatrixContext) throws -> CLIMatrixOutcome] = [
    "cli.keyOption": { c in try c.makeDatabase(key: 0); return try c.runCase(["--db", "app.sqlite", "--key", c.argumentSecret()], mustName: []) },
    "cli.passphraseOption": { c in try c.makeDatabase(key: 0); return try c.runCase(["--db", "app.sqlite", "--passphrase=\(c.argumentSecret())"], mustName: []) },
    "cli.hexOption": { c in try c.makeDatabase(key: 0); return try c.runCase(["--db", "app.sqlite", "--hex", c.argumentSecret()], mustName: []) },
    "cli.unknownArgument": { c in try c.makeDatabase(key: 0); return try c.runCase(["--db", "app.sqlite", c.argumentSecret()], mustName: []) },
    "cli.noDatabase": { c in try c.makeDatabase(key: 0); return try c.runCase([], mustName: ["--db"]) },
    "cli.jobs": { c in try c.makeDatabase(key: 0); return try c.runCase(["--db", "app.sqlite", "--jobs", "0"], mustName: ["--jobs"]) },
    "cli.threads": { c in try c.makeDatabase(key: 0); return try c.runCase(["--db", "app.sqlite", "--threads", "0"], mustName: ["--threads"]) },
    "cli.busyTimeout": { c in try c.makeDatabase(key: 0); return try c.runCase(["--db", "app.sqlite", "--busy-timeout", "100000"], mustName: ["--busy-timeout"]) },
    "cli.secretAsJobs": { c in try c.makeDatabase(key: 0); return try c.runCase(["--db", "app.sqlite", "--jobs", c.argumentSecret()], mustName: ["--jobs"]) },
    "cli.secretAsVerify": { c in try c.makeDatabase(key: 0); return try c.runCase(["--db", "app.sqlite", "--verify=\(c.argumentSecret())"], mustName: ["--verify"]) },
    "cli.decryptUnconfirmed": { c in
        try c.makeDatabase(key: 2)
        return try c.runCase(["decrypt", "--db", "app.sqlite", "--out", "plain.sqlite"], mustName: ["--confirm-plaintext"], also: [c.directory.file("plain.sqlite")])
    },
    "cli.decryptExists": { c in
        try c.makeDatabase(key: 2)
        _ = FileManager.default.createFile(atPath: c.directory.file("plain.sqlite"), contents: Data("precious".utf8))
        return try c.runCase(["decrypt", "--db", "app.sqlite", "--out", "plain.sqlite", "--confirm-plaintext"], mustName: ["plain.sqlite"], also: [c.directory.file("plain.sqlite")])
    },
    "cli.dumpExists": { c in
        try c.makeDatabase(key: 2)
        _ = FileManager.default.createFile(atPath: c.directory.file("dump.sql"), contents: Data("precious".utf8))
        return try c.runCase(["dump", "--db", "app.sqlite", "--out", "dump.sql"], mustName: ["dump.sql"], also: [c.directory.file("dump.sql")])
    },
    "cli.allNothing": { c in
        c.write("databases:\n  - path: \"tenants/*.sqlite\"\n    keys:\n      - id: t\n        passphrase: \"\(c.passphrase("tenant"))\"\n")
        return try c.runCase(["--all"], mustName: ["Keys"])
    },
    "cli.keysMissing": { c in try c.makeDatabase(key: 0); return try c.runCase(["--db", "app.sqlite", "--keys", "Nope"], mustName: ["Nope"]) },
    "cli.keysNotYAML": { c in
        try c.makeDatabase(key: 0)
        c.write("databases: [\n  - path: app.sqlite\n    keys: [{id: k, passphrase: \"\(c.passphrase("broken"))\"\n")
        return try c.runCase(["--db", "app.sqlite"], mustName: ["Keys"], also: [c.directory.file("Keys")])
    },
    // `pin:` beside a PIN source, through `rekey keys retire-check` (a command that loads the
    // Keys file and opens no database): refused, the PIN in no output.
    "cli.pinBesidePinEnv": { c in
        try c.makeDatabase(key: 0)
        let pin = c.secret("pin-\(UInt32.random(in: 100_000...999_999))")
        c.write(c.pkcs11KeysFile(pinLines: "      pin_env: HSM_PIN\n      pin: \"\(pin)\"\n"))
        return try c.runCase(["keys", "retire-check", "--kek", "hsm"], environment: ["HSM_PIN": pin], mustName: ["Keys"], also: [c.directory.file("Keys")])
    },
    "cli.pinBesidePinFile": { c in
        try c.makeDatabase(key: 0)
        let pin = c.secret("pin-\(UInt32.random(in: 100_000...999_999))")
        c.write(pin, to: "hsm.pin")
        chmod(c.directory.file("hsm.pin"), 0o600)
        c.write(c.pkcs11KeysFile(pinLines: "      pin: \"\(pin)\"\n      pin_file: hsm.pin\n"))
        return try c.runCase(["keys", "retire-check", "--kek", "hsm"], mustName: ["Keys"], also: [c.directory.file("Keys")])
    },
    "cli.notListed": { c in
        try c.makeDatabase(at: c.directory.file("other.sqlite"), key: 0)
        return try c.runCase(["--db", "other.sqlite"], mustName: ["other.sqlite"], also: [c.directory.file("other.sqlite")])
    },
    "cli.envUnset": { c in
        try c.makeDatabase(key: 0)
        guard case .environment(let variable, _) = c.ring.keys[2].key.source else { throw FixtureError(message: "k3 is not an env key") }
        return try c.runCase(["--db", "app.sqlite"], environment: [:], mustName: [variable, "k3"])
    },
    "cli.kdfIterHuge": { c in
        try c.makeDatabase(key: 0)
        let yaml = c.ring.yaml(databasePath: "app.sqlite").replacingOccurrences(of: "      - id: \"k2\"", with: "        cipher: {kdf_iter: 3000000000}\n      - id: \"k2\"")
        c.write(yaml)
        return try c.runCase(["--db", "app.sqlite"], mustName: ["k1", "app.sqlite"])
    },
    "cli.keyFileReadable": { c in
        let ring = TestKeyring([.passphrase, .fileHex], in: c.directory, idPrefix: "f")
        c.write(ring.yaml(databasePath: "app.sqlite"))
        try Fixture.createWithShell(at: c.db, key: ring.keys[0].shellKey, rows: 5)
        chmod(c.directory.file("f2.key"), 0o644)
        return try c.runCase(["--db", "app.sqlite"], environment: [:], mustName: [c.directory.file("f2.key"), "f2"], also: [c.directory.file("f2.key")])
    },
    "cli.missingDatabase": { c in try c.runCase(["--db", "app.sqlite"], mustName: ["app.sqlite"]) },
    "cli.statusMissing": { c in try c.runCase(["status", "--db", "app.sqlite"], mustName: ["app.sqlite"]) },
    "cli.noKeyOpens": { c in
        try Fixture.createWithShell(at: c.db, key: .passphrase(c.passphrase("stranger")), rows: 5)
        return try c.runCase(["--db", "app.sqlite"], mustName: ["app.sqlite", "k1", "k2", "k3"])
    },
    "cli.dumpNoKey": { c in
        try Fixture.createWithShell(at: c.db, key: .passphrase(c.passphrase("stranger")), rows: 5)
        return try c.runCase(["dump", "--db", "app.sqlite"], mustName: ["app.sqlite", "k1", "k2", "k3"])
    },
    "cli.plaintext": { c in
        _ = try SQLiteShell.run(c.db, "CREATE TABLE t(a); INSERT INTO t VALUES ('plain');")
        return try c.runCase(["--db", "app.sqlite"], mustName: ["app.sqlite"])
    },
    "cli.empty": { c in
        _ = FileManager.default.createFile(atPath: c.db, contents: Data())
        return try c.runCase(["--db", "app.sqlite"], mustName: ["app.sqlite"])
    },
    "cli.directory": { c in
        try FileManager.default.createDirectory(atPath: c.db, withIntermediateDirectories: false)
        return try c.runCase(["--db", "app.sqlite"], mustName: ["app.sqlite"])
    },
    "cli.unreadable": { c in try c.asNobodyCase(key: 2) { chmod(c.db, 0o600) } },
    "cli.readOnlyFile": { c in try c.asNobodyCase(key: 0) { chmod(c.db, 0o644) } },
    "cli.readOnlyFolder": { c in
        try c.asNobodyCase(key: 0, mustName: ["app.sqlite", c.directory.path]) { chown(c.db, OtherUser.nobody, OtherUser.nobody) }
    },
    "cli.locked": { c in
        try c.makeDatabase(key: 0)
        let before = FileSnapshot(c.db)
        let holder = try ShellHolder.exclusiveLock(on: c.db, key: c.ring.keys[0].shellKey)
        let result = try c.run(["--db", "app.sqlite", "--busy-timeout", "0.2"])
        holder.release()
        return CLIMatrixOutcome(result: result, mustName: ["app.sqlite"], unchanged: [(c.db, before)])
    },
    "cli.fileSizeLimit": { c in
        try c.makeDatabase(key: 0)
        return try c.runCase(["--db", "app.sqlite"], prefix: "ulimit -f 4;", mustName: ["app.sqlite"])
    },
    "cli.diskFull": { c in
        switch try c.databaseOnNearlyFullDisk(key: 0) {
        case .failure(let reason): return .skip(reason.message)
        case .success(let path):
            c.write(c.ring.yaml(databasePath: path), to: "Keys-disk")
            let before = FileSnapshot(path)
            let result = try c.run(["--db", path, "--keys", "Keys-disk"])
            return CLIMatrixOutcome(result: result, mustName: [path], unchanged: [(path, before)])
        }
    },
]

@Suite("Bad-input matrix: the rekey command", .ownThread)
struct BadInputCLITests {
    @Test("each bad input: its exit code, a message naming the file, option or key id with advice, no key material in any output, nothing changed on disk",
          arguments: BadInputCatalog.cases(in: .cli))
    func badInput(_ item: BadInputCase) throws {
        let implementation = try #require(cliMatrixCases[item.id], "no implementation for \(item.id)")
        let context = CLIMatrixContext("cli-matrix")
        context.write(context.ring.yaml(databasePath: "app.sqlite"))
        let outcome = try implementation(context)
        if let reason = outcome.skipped {
            print("bad-input case \(item.id) skipped: \(reason)")
            return
        }
        let result = try #require(outcome.result)
        #expect(result.status == item.exitCode, "\(item.id): exit \(result.status): \(result.stderr)")
        let output = result.stdout + result.stderr
        for name in outcome.mustName {
            #expect(result.stderr.contains(name), "\(item.id): the message does not name \(name): \(result.stderr)")
        }
        #expect(result.stderr.contains(item.advice), "\(item.id): the message does not say \"\(item.advice)\": \(result.stderr)")
        let leaks = SecretScan.leaks(of: context.secrets, in: output)
        #expect(leaks.isEmpty && !output.contains("MARKER"), "\(item.id): key material in the output: \(output)")
        #expect(!result.stderr.contains("Fatal error") && result.status < 128, "\(item.id): the command crashed: \(result.stderr)")
        for (path, before) in outcome.unchanged {
            #expect(FileSnapshot(path) == before, "\(item.id): \(path) or its folder changed (before: \(before.folderListing), after: \(FileSnapshot(path).folderListing))")
        }
    }

    @Test("every command-line case of the catalog has an implementation, and every implementation a case")
    func complete() {
        #expect(Set(BadInputCatalog.cases(in: .cli).map(\.id)) == Set(cliMatrixCases.keys))
    }
}
