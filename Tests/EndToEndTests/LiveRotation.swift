import EncryptedSQLite
import Foundation
import TestSupport
import Testing

/// A folder with a database on an old key, a Keys file that lists it, and the processes the
/// live-rotation tests (`LiveRotationTests`) start on it: `crash-harness start|serve` (the service)
/// and `rekey`.
struct LiveRotationFolder {
    let folder: TemporaryDirectory
    let journalMode: String
    /// The hex keys, oldest first; the Keys file lists `keys[0...listed]`.
    private(set) var keys: [String]
    var path: String { folder.file("app.sqlite") }
    var keysFile: String { folder.file("Keys") }

    /// A database on `key-0` in `journalMode` with an empty `ledger` and `bigRows` rows of 1000
    /// random bytes in `big` (so that a rotation takes a while), listed in a Keys file with
    /// `key-0` … `key-<listed>`.
    init(journalMode: String, bigRows: Int = 3000, listed: Int = 1) throws {
        folder = TemporaryDirectory("live-rotation")
        self.journalMode = journalMode
        keys = [TestKeys.hex()]
        let first = try KeyList(database: folder.file("app.sqlite"), keys: [DatabaseKey(id: "key-0", source: .hex(keys[0]))])
        let database = try EncryptedDatabase(path: folder.file("app.sqlite"), keys: first, options: OpenOptions(createIfMissing: true))
        try database.writeWithoutTransaction { db in
            _ = try db.queryValue("PRAGMA journal_mode = \(journalMode)", as: String.self)
            try db.execute("""
                CREATE TABLE ledger(service TEXT NOT NULL, n INTEGER NOT NULL, payload BLOB, PRIMARY KEY(service, n));
                CREATE TABLE big(id INTEGER PRIMARY KEY, payload BLOB);
                WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < \(bigRows))
                INSERT INTO big(payload) SELECT randomblob(1000) FROM n;
                """)
            if journalMode == "wal" { try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
        }
        for _ in 0..<listed { keys.append(TestKeys.hex()) }
        writeKeysFile()
    }

    /// The page size of each key's cipher settings, when the Keys file gives one (`nil`: the
    /// engine's default).
    private var pageSizes: [Int?] = []

    /// Appends a new key to the Keys file (the operator's first step of a rotation); with
    /// `pageSize`, its entry gives that page size, so rotating to it takes an export.
    mutating func appendKey(pageSize: Int? = nil) {
        keys.append(TestKeys.hex())
        pageSizes += Array(repeating: nil, count: keys.count - 1 - pageSizes.count) + [pageSize]
        writeKeysFile()
    }

    private func writeKeysFile() {
        let entries = keys.enumerated().map { index, hex in
            let settings = index < pageSizes.count ? pageSizes[index].map { "\n        cipher: {page_size: \($0)}" } ?? "" : ""
            return "      - id: key-\(index)\n        hex: \(hex)" + settings
        }.joined(separator: "\n")
        let text = "databases:\n  - path: app.sqlite\n    keys:\n" + entries + "\n"
        // Replaced by a rename, so that a process never reads half a file.
        let temporary = folder.file(".Keys.new")
        _ = FileManager.default.createFile(atPath: temporary, contents: Data(text.utf8))
        chmod(temporary, 0o600)
        rename(temporary, keysFile)
    }

    /// The hex of key `key-<n>`.
    func keyHex(_ id: String) -> String { keys[Int(id.dropFirst(4))!] }

    /// The key list of the Keys file as it is now.
    func keyList() throws -> KeyList { try KeysFile.load(path: keysFile).keyList(forDatabase: path) }

    /// HARNESS_LOG (`info`, `debug`, …): the services log the library's steps and `rekey` runs
    /// with `--verbose`, so that a failed round's output says what each process did.
    static let logLevel = ProcessInfo.processInfo.environment["HARNESS_LOG"]

    /// A configured, not yet started `crash-harness` process.
    func service(_ arguments: [String], name: String, output: Pipe, errors: Pipe) -> Process {
        // A hung service stopped by the hang guard (SIGQUIT) prints every thread's stack.
        process(BuiltProduct.crashHarness, arguments, environment: ["SERVICE_NAME": name, "SWIFT_BACKTRACE": "threads=all,registers=none,images=none"],
                output: output, errors: errors)
    }

    /// A configured, not yet started `rekey` process rotating the database.
    func rekey(_ extra: [String] = [], output: Pipe, errors: Pipe) -> Process {
        let verbose = Self.logLevel != nil ? ["--verbose"] : []
        return process(RekeyCLI.path, ["--db", "app.sqlite", "--keys", "Keys", "--busy-timeout", "10"] + verbose + extra, environment: [:], output: output, errors: errors)
    }

    private func process(_ executable: String, _ arguments: [String], environment: [String: String], output: Pipe, errors: Pipe) -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var environment = ProcessRunner.withPATH(environment)
        environment["HARNESS_LOG"] = Self.logLevel
        process.environment = environment
        process.currentDirectoryURL = URL(fileURLWithPath: folder.path)
        process.standardOutput = output
        process.standardError = errors
        return process
    }

    /// The ledger rows per service name.
    func ledger() throws -> [String: Set<Int>] {
        let database = try EncryptedDatabase(path: path, keys: keyList(), options: OpenOptions(rotateToCurrentKey: false))
        return try database.read { db in
            try db.query("SELECT service, n FROM ledger").reduce(into: [:]) { rows, row in
                rows[try row.get(0, as: String.self), default: []].insert(try row.get(1, as: Int.self))
            }
        }
    }
}

/// A started process and what it printed, collected line by line while it runs, so that a test
/// can wait for a line instead of sleeping.
final class RunningProcess: @unchecked Sendable {
    let name: String
    let process: Process
    private let output = Pipe(), errors = Pipe()
    private let lock = NSLock()
    private var collected: (stdout: OutputLines, stderr: OutputLines)?
    private var child: ChildSignal?

    init(name: String, _ make: (Pipe, Pipe) -> Process) {
        self.name = name
        process = make(output, errors)
    }

    func start() throws {
        try process.run()
        let child = ChildSignal(process)
        try output.fileHandleForWriting.close()
        try errors.fileHandleForWriting.close()
        lock.withLock {
            self.child = child
            collected = (OutputLines(output.fileHandleForReading), OutputLines(errors.fileHandleForReading))
        }
    }

    /// Sends `number` to this process if it has not ended (``ChildSignal``); `true` when sent.
    @discardableResult
    func signal(_ number: Int32) -> Bool {
        lock.withLock { child }?.send(number) ?? false
    }

    /// Its standard output's lines as they arrive.
    var lines: OutputLines? { lock.withLock { collected?.stdout } }

    /// Waits for the end; returns the exit status (128 + signal when killed). A process still
    /// running after `limit` is stopped (``HangGuard``, its backtrace on its standard error) and
    /// the test fails.
    @discardableResult
    func wait(limit: Duration = .seconds(120)) -> Int32 {
        let hangGuard = HangGuard(process, limit: limit)
        process.waitUntilExit()
        let hung = hangGuard.disarm()
        if let (stdout, stderr) = lock.withLock({ collected }) {
            stdout.waitForEnd()  // joins: everything it printed has been read
            stderr.waitForEnd()
        }
        if hung {
            Issue.record("\(name) did not end within \(limit) and was stopped with SIGQUIT: \(stderr.suffix(8000))")
        }
        return process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
    }

    var stdout: String { lock.withLock { collected?.stdout.text ?? "" } }
    var stderr: String { lock.withLock { collected?.stderr.text ?? "" } }
}
