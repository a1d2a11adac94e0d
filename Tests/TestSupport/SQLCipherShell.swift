import Foundation

/// A key as the independent `sqlcipher` shell takes it in `PRAGMA key`.
public enum ShellKey: Sendable {
    /// A passphrase.
    case passphrase(String)
    /// A raw key of 64 hex digits.
    case hex(String)

    /// The `PRAGMA key = …;` line. Keys travel on the shell's standard input, never in argv.
    /// The shell then uses its engine's default format, as the library does for a key without
    /// settings (3.x on SQLCipher 3, 4.x on SQLCipher 4). Since SQLCipher 4 answers `PRAGMA key`
    /// with a row (`ok`), the line runs with output off there, so that what a script prints is
    /// the same on both engines. Callers start their SQL on a new line.
    public var pragma: String {
        guard SQLCipherShell.majorVersion >= 4 else { return statement }
        return ".output /dev/null\n" + statement + "\n.output stdout"
    }

    /// ``pragma`` followed, on a SQLCipher 4 shell, by `PRAGMA cipher_compatibility = 3;` (output
    /// off): the shell then reads and writes the SQLCipher 3.x format, as SQLCipher 3 does by default.
    public var pragmaVersion3: String {
        guard SQLCipherShell.majorVersion >= 4 else { return statement }
        return ".output /dev/null\n" + statement + "\nPRAGMA cipher_compatibility = 3;\n.output stdout"
    }

    private var statement: String {
        switch self {
        case .passphrase(let text): "PRAGMA key = '\(text.replacingOccurrences(of: "'", with: "''"))';"
        case .hex(let digits): "PRAGMA key = \"x'\(digits)'\";"
        }
    }
}

/// Runs Debian's `sqlcipher` command-line shell: a tool independent of this library, used to make
/// test files and to check what the library wrote.
public enum SQLCipherShell {
    /// The shell's path, or `nil` when it is not installed.
    public static let path: String? = ProcessRunner.which("sqlcipher")

    /// The shell's SQLCipher major version (3 on Debian bookworm, 4 on trixie), read once with
    /// `PRAGMA cipher_version`; 0 when it cannot be read.
    public static let majorVersion: Int = {
        guard let path, let result = try? ProcessRunner.run(path, ["-batch", ":memory:"], input: "PRAGMA cipher_version;\n") else { return 0 }
        return Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines).prefix { $0.isNumber }) ?? 0
    }()

    /// Runs `sql` on `database`, keyed with `key` (unkeyed when `nil`): in the shell's default
    /// format, or with `version3` in the 3.x format (``ShellKey/pragmaVersion3``).
    public static func run(_ database: String, key: ShellKey?, version3: Bool = false, _ sql: String) throws -> ProcessResult {
        guard let path else { throw ShellMissing() }
        let script = (key.map { (version3 ? $0.pragmaVersion3 : $0.pragma) + "\n" } ?? "") + sql + "\n"
        return try ProcessRunner.run(path, ["-batch", "-bail", database], input: script)
    }

    /// `true` when `key` opens `database` and it passes `PRAGMA integrity_check` (with `version3`,
    /// in the 3.x format).
    public static func opens(_ database: String, with key: ShellKey, version3: Bool = false) throws -> Bool {
        let result = try run(database, key: key, version3: version3, "PRAGMA integrity_check;")
        return result.status == 0 && result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "ok"
    }

    /// Raised when the `sqlcipher` shell is not installed (the test setup installs it).
    public struct ShellMissing: Error, CustomStringConvertible {
        public var description: String { "the sqlcipher shell is not installed; run scripts/setup.sh" }
    }
}

/// Runs Debian's plain `sqlite3` shell (no encryption at all), to make the unencrypted files that
/// users upgrade from and to check decrypted copies.
public enum SQLiteShell {
    /// The shell's path, or `nil` when it is not installed.
    public static let path: String? = ProcessRunner.which("sqlite3")

    /// Runs `sql` on `database`.
    public static func run(_ database: String, _ sql: String) throws -> ProcessResult {
        guard let path else { throw SQLCipherShell.ShellMissing() }
        return try ProcessRunner.run(path, ["-batch", "-bail", database], input: sql + "\n")
    }

    /// Creates the fixture (schema, rows, `user_version`, `application_id`) in a new plaintext file.
    public static func createFixture(at database: String, rows: Int = 200, walMode: Bool = false) throws {
        let result = try run(database, (walMode ? "PRAGMA journal_mode = WAL;\n" : "") + Fixture.sql(rows: rows))
        guard result.status == 0 else { throw FixtureError(message: "sqlite3 shell failed: \(result.stderr)") }
    }
}
