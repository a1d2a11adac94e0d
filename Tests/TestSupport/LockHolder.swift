import Foundation

/// Another process that holds a database open: the `sqlcipher` (or `sqlite3`) shell, keyed on its
/// standard input, which runs some SQL (e.g. `BEGIN EXCLUSIVE` and a write) and then waits, with
/// its locks held, until ``release()``.
public final class ShellHolder: @unchecked Sendable {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    /// The shell's standard error, kept in a file of its own (its messages: a refused statement).
    private let errorFile = NSTemporaryDirectory() + "shell-holder-\(UUID().uuidString).err"

    /// The holder's process id.
    public var pid: Int32 { process.processIdentifier }

    /// Starts `shell` on `database`, keys it with `key` (on standard input), runs `sql`, and
    /// returns once the shell has done so (it prints a marker line after `sql`).
    public init(shell: String, database: String, key: ShellKey?, sql: String) throws {
        process.executableURL = URL(fileURLWithPath: shell)
        process.arguments = ["-batch", database]
        process.standardInput = input
        process.standardOutput = output
        _ = FileManager.default.createFile(atPath: errorFile, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: errorFile) ?? FileHandle.nullDevice
        try process.run()
        try send((key.map { $0.pragma + "\n" } ?? "") + sql, database: database)
    }

    /// Runs more SQL in the held shell (e.g. the `COMMIT` of a transaction it holds) and returns
    /// once the shell has done so.
    /// - Throws: ``FixtureError`` when the shell stopped before it answered.
    public func run(_ sql: String) throws {
        try send(sql, database: "its database")
    }

    /// Runs `sql` in the held shell and returns what it printed (e.g. a count the shell's own
    /// connection sees: whether its earlier statements took effect).
    /// - Throws: ``FixtureError`` when the shell stopped before it answered.
    public func query(_ sql: String) throws -> String {
        try send(sql, database: "its database").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Sends `sql` and waits for the marker after it; returns what the shell printed before it.
    @discardableResult
    private func send(_ sql: String, database: String) throws -> String {
        let ready = "holder-ready-\(UUID().uuidString.prefix(8))"
        input.fileHandleForWriting.write(Data((sql + "\nSELECT '\(ready)';\n").utf8))
        var seen = Data()
        let deadline = Date().addingTimeInterval(30)  // a hang guard, not an order
        while true {
            let text = String(decoding: seen, as: UTF8.self)
            if let marker = text.range(of: ready) { return String(text[..<marker.lowerBound]) }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty || Date() > deadline {
                release()
                throw FixtureError(message: "the shell holding \(database) stopped before it was ready")
            }
            seen.append(chunk)
        }
    }

    /// A `sqlcipher` shell in `BEGIN EXCLUSIVE` with a pending write: no other connection can read
    /// or write `database` until ``release()``.
    public static func exclusiveLock(on database: String, key: ShellKey, table: String = "audit") throws -> ShellHolder {
        guard let shell = SQLCipherShell.path else { throw SQLCipherShell.ShellMissing() }
        return try ShellHolder(shell: shell, database: database, key: key, sql: "BEGIN EXCLUSIVE;\nINSERT INTO \(table) DEFAULT VALUES;")
    }

    /// What the shell has written to its standard error so far (e.g. "database is locked" for a
    /// statement it refused; it goes on with the next one).
    public var errors: String {
        (try? String(contentsOfFile: errorFile, encoding: .utf8)) ?? ""
    }

    /// Rolls back, quits and waits for the shell to exit.
    public func release() {
        guard process.isRunning else { return }
        input.fileHandleForWriting.write(Data("ROLLBACK;\n.quit\n".utf8))
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }

    deinit {
        release()
        try? FileManager.default.removeItem(atPath: errorFile)
    }
}
