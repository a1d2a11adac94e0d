import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// Reads the argument list of every process on the machine, over and over on a thread of its
/// own, and remembers any that holds one of the secrets.
final class ProcessListWatcher: @unchecked Sendable {
    private let secrets: [String]
    private let lock = NSLock()
    // Invariant: the fields below are only touched with `lock` held.
    private var running = true
    private var leaks: [String] = []
    private var scans = 0
    private var commands: Set<String> = []
    private let done = DispatchSemaphore(value: 0)

    init(secrets: [String]) {
        self.secrets = secrets
        let thread = Thread { [self] in
            while lock.withLock({ running }) {
                scanOnce()
                usleep(2000)  // paces the scans of /proc; not an order
            }
            done.signal()
        }
        thread.start()
    }

    /// One pass over `/proc/*/cmdline`.
    func scanOnce() {
        let pids = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).filter { $0.allSatisfy(\.isNumber) }
        var found: [String] = []
        var seen: [String] = []
        for pid in pids {
            guard let data = TestFiles.contents("/proc/\(pid)/cmdline"), !data.isEmpty else { continue }
            let arguments = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            seen.append(URL(fileURLWithPath: arguments.first ?? "").lastPathComponent)
            let line = arguments.joined(separator: " ")
            if !SecretScan.leaks(of: secrets, in: line).isEmpty { found.append("pid \(pid): \(arguments.first ?? "?")") }
        }
        lock.withLock {
            scans += 1
            leaks += found
            commands.formUnion(seen)
        }
    }

    /// Stops and returns the processes whose arguments held a secret, the number of passes and
    /// the names of the commands seen.
    func stop() -> (leaks: [String], scans: Int, commands: Set<String>) {
        lock.withLock { running = false }
        done.wait()
        return lock.withLock { (leaks, scans, commands) }
    }
}

@Suite("Secrets: the rekey command", .ownThread)
struct SecretsCLITests {
    /// Every subcommand, success and failure, in text and JSON, verbose: no key material in
    /// stdout, stderr, the files it writes, or any process's argument list while it all runs.
    @Test("no key material in any subcommand's output, written files or any process's arguments (text, --json, --verbose, failures)")
    func everySubcommand() throws {
        let fixture = try CLIFixture(kinds: [.passphrase, .fileHex, .envPassphrase, .hex])
        let plainRing = fixture.ring
        let watcher = ProcessListWatcher(secrets: plainRing.keys.map(\.secret))
        // A plaintext file listed with a plaintext entry (the export path), and a glob of tenants.
        try FileManager.default.createDirectory(atPath: fixture.directory.file("tenants"), withIntermediateDirectories: false)
        for name in ["a", "b"] {
            try Fixture.createWithShell(at: fixture.directory.file("tenants/\(name).sqlite"), key: plainRing.keys[1].shellKey, rows: 5)
        }
        try SQLiteShell.createFixture(at: fixture.directory.file("plain.sqlite"), rows: 5)
        let yaml = plainRing.yaml(databasePath: "app.sqlite")
            + TestKeyring.yamlEntry(path: "plain.sqlite", plaintextID: "v1", keys: plainRing.keys)
            + TestKeyring.yamlEntry(path: "tenants/*.sqlite", plaintextID: nil, keys: plainRing.keys)
        _ = FileManager.default.createFile(atPath: fixture.directory.file("Keys"), contents: Data(yaml.utf8), attributes: [.posixPermissions: 0o600])

        var runs: [[String]] = [
            ["--help"], ["rotate", "--help"], ["status", "--help"], ["dump", "--help"], ["decrypt", "--help"],
            ["status", "--db", "app.sqlite"], ["status", "--all", "--json"],
            ["--db", "app.sqlite", "--check", "--verbose"], ["--db", "app.sqlite", "--check", "--json"],
            ["--db", "app.sqlite", "--verbose"], ["--db", "plain.sqlite", "--verbose", "--json"],
            ["--all", "--jobs", "2", "--verbose"], ["--all", "--json"],
            ["dump", "--db", "app.sqlite", "--verbose"], ["dump", "--db", "app.sqlite", "--out", "dump.sql"],
            ["decrypt", "--db", "app.sqlite", "--out", "decrypted.sqlite", "--confirm-plaintext", "--verbose"],
            // Failures: missing, not listed, a Keys file problem, busy, and usage errors.
            ["--db", "missing.sqlite", "--verbose"], ["--db", "unlisted.sqlite", "--json"], ["--db", "app.sqlite", "--keys", "Nope", "--verbose"],
            ["decrypt", "--db", "app.sqlite", "--out", "decrypted.sqlite", "--confirm-plaintext"], ["--jobs", "0"],
        ]
        runs.append(["status", "--db", "app.sqlite", "--verbose", "--json"])
        var outputs: [String] = []
        for arguments in runs {
            let result = try fixture.rekey(arguments)
            #expect(result.status < 128, "rekey \(arguments.joined(separator: " ")) crashed: \(result.stderr)")
            outputs.append(result.stdout + result.stderr)
        }
        // Unset variable and a key file readable by others, verbose.
        outputs.append(try RekeyCLI.run(["--db", "app.sqlite", "--verbose"], in: fixture.directory).stderr)
        chmod(fixture.directory.file("k2.key"), 0o644)
        outputs.append(try fixture.rekey(["--db", "app.sqlite", "--verbose"]).stderr)
        chmod(fixture.directory.file("k2.key"), 0o600)
        // A locked database, verbose.
        let holder = try ShellHolder.exclusiveLock(on: fixture.path, key: plainRing.keys[3].shellKey)
        outputs.append(try fixture.rekey(["--db", "app.sqlite", "--verbose", "--busy-timeout", "0.2"]).stderr)
        holder.release()

        let (leaks, scans, commands) = watcher.stop()
        #expect(leaks.isEmpty, "key material in a process's arguments: \(leaks)")
        #expect(scans > 10 && commands.contains("rekey"), "\(scans) scans of the process list; rekey seen: \(commands.contains("rekey"))")
        // The files rekey wrote hold the data, never a key.
        for file in ["dump.sql", "decrypted.sqlite"] {
            let content = try Data(contentsOf: URL(fileURLWithPath: fixture.directory.file(file)))
            #expect(SecretScan.leaks(of: plainRing.keys.map(\.secret), in: content).isEmpty, "key material in \(file)")
        }
        let secrets = plainRing.keys.map(\.secret)
        for output in outputs {
            #expect(SecretScan.leaks(of: secrets, in: output).isEmpty && !output.contains("MARKER"), "key material in output: \(output.prefix(2000))")
        }
        #expect(outputs.joined().contains("rotating database key"), "the verbose log of a rotation was not seen")
    }

    @Test("while rekey runs, its argument list (/proc/<pid>/cmdline) holds no key, nor does the sqlcipher shell holding the lock")
    func argumentList() throws {
        let fixture = try CLIFixture(kinds: [.passphrase, .envHex, .filePassphrase])
        let secrets = fixture.ring.keys.map(\.secret)
        let holder = try ShellHolder.exclusiveLock(on: fixture.path, key: fixture.ring.keys[0].shellKey)
        defer { holder.release() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: RekeyCLI.path)
        // rekey waits on the held lock for as long as the shell holds it (its busy timeout is a
        // hang guard): the reads below take their number from a count, not from the clock.
        process.arguments = ["--db", "app.sqlite", "--busy-timeout", "120", "--verbose"]
        process.currentDirectoryURL = URL(fileURLWithPath: fixture.directory.path)
        process.environment = ProcessRunner.withPATH(fixture.ring.environment)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        var reads = 0
        let hangGuard = Date().addingTimeInterval(100)
        while process.isRunning && reads < 40 && Date() < hangGuard {
            for pid in [process.processIdentifier, holder.pid] {
                if let data = TestFiles.contents("/proc/\(pid)/cmdline"), !data.isEmpty {
                    reads += 1
                    let text = String(decoding: data.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self)
                    #expect(SecretScan.leaks(of: secrets, in: text).isEmpty && !text.contains("MARKER"), "key material in the arguments of pid \(pid)")
                    #expect(text.contains("app.sqlite"))
                }
            }
            usleep(20_000)  // paces the reads; not an order
        }
        #expect(process.isRunning, "rekey should still be waiting on the held lock")
        holder.release()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "rekey should have rotated the file once the shell let it go")
        #expect(reads >= 40, "\(reads) reads of the argument lists")
    }

    @Test("the byte search the secret scans use finds a pattern at the start, the middle and the end, and only there")
    func byteSearch() {
        let data = Data("aab-aabc-xyz".utf8)
        for present in ["aab", "aabc", "-x", "xyz", "aab-aabc-xyz", ""] { #expect(data.contains(bytes: present.utf8), "\(present)") }
        for absent in ["aac", "xyzz", "abc-a", "aab-aabc-xyz!"] { #expect(!data.contains(bytes: absent.utf8), "\(absent)") }
        #expect(!Data().contains(bytes: "a".utf8))
    }

    @Test("the test helpers refuse to put a registered key in a child's arguments")
    func helpersRefuseSecretsInArguments() throws {
        let secret = TestKeys.passphrase("argv")
        #expect(throws: SecretInArgumentsError.self) { try ProcessRunner.run("/bin/echo", [secret]) }
        #expect(throws: SecretInArgumentsError.self) { try ProcessRunner.run("/bin/echo", ["PRAGMA key = '\(TestKeys.hex())'"]) }
        // The other forms: the other letter case, half of a key, the hex of a passphrase's bytes.
        let hex = TestKeys.hex()
        #expect(throws: SecretInArgumentsError.self) { try ProcessRunner.run("/bin/echo", ["--x", "x'\(hex.uppercased())'"]) }
        #expect(throws: SecretInArgumentsError.self) { try ProcessRunner.run("/bin/echo", ["a\(hex.suffix(32))z"]) }
        let hexOfPassphrase = secret.utf8.map { String(format: "%02X", $0) }.joined()
        #expect(throws: SecretInArgumentsError.self) { try ProcessRunner.run("/bin/echo", ["blob X'\(hexOfPassphrase)'"]) }
        #expect(try ProcessRunner.run("/bin/echo", [String(hex.prefix(7)), "short"]).status == 0)
        #expect(try ProcessRunner.run("/bin/echo", ["no secret"]).stdout == "no secret\n")
    }
}
