import Foundation

/// An independent SQLCipher 4 build: PyPI's `sqlcipher3-binary` (the version pinned in
/// `scripts/sqlcipher4-requirements.txt`: SQLCipher 4.12, SQLite 3.51) in a virtual environment under
/// `.build/sqlcipher4-venv`, installed on first use (also by `scripts/setup.sh`) from the index this
/// machine's pip configuration names. Keys travel on the helper's standard input, never in argv.
///
/// When it cannot be installed (no network, no PyPI), the interop tests fail with the reason; with
/// `SQLCIPHER4_INTEROP_OPTIONAL=1` they are skipped instead, except under CI (`CI=true`).
public enum SQLCipher4 {
    /// The package root (three levels above this file).
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    static let venv = packageRoot + "/.build/sqlcipher4-venv"
    static let python = venv + "/bin/python"

    /// `nil` when SQLCipher 4 is ready; otherwise why it could not be installed.
    public static let unavailableReason: String? = install()

    /// `true` when the SQLCipher 4 helper can run.
    public static var isAvailable: Bool { unavailableReason == nil }

    /// Whether the interop tests run: always, unless SQLCipher 4 is missing and
    /// `SQLCIPHER4_INTEROP_OPTIONAL=1` allows skipping them (never under CI). When they run without
    /// it, every call fails with ``unavailableReason``.
    public static var interopTestsRun: Bool {
        let environment = ProcessInfo.processInfo.environment
        let optional = environment["SQLCIPHER4_INTEROP_OPTIONAL"] == "1" && environment["CI"] != "true"
        return isAvailable || !optional
    }

    private static func install() -> String? {
        if (try? run(["op": "version"]))?["version"] != nil { return nil }
        guard let python3 = ProcessRunner.which("python3") else { return "python3 is not installed" }
        do {
            if !FileManager.default.isExecutableFile(atPath: python) {
                let created = try ProcessRunner.run(python3, ["-m", "venv", venv])
                guard created.status == 0 else { return "python3 -m venv failed: \(created.stderr)" }
            }
            let installed = try ProcessRunner.run(venv + "/bin/pip", ["install", "--quiet", "--disable-pip-version-check", "-r", packageRoot + "/scripts/sqlcipher4-requirements.txt"])
            guard installed.status == 0 else { return "pip install sqlcipher3-binary (scripts/sqlcipher4-requirements.txt) failed: \(installed.stderr.suffix(400))" }
            guard (try run(["op": "version"]))["version"] != nil else { return "sqlcipher3 does not load" }
            return nil
        } catch {
            return "could not set up SQLCipher 4: \(error)"
        }
    }

    /// The SQLCipher version of the helper (e.g. `4.12.0 community`).
    public static func version() throws -> String {
        try requireAvailable()
        return try run(["op": "version"])["version"] as? String ?? "?"
    }

    /// Runs `statements` on `database` with SQLCipher 4: keyed with `key`, after
    /// `PRAGMA cipher_compatibility = 3` when `compatibility3` is set. Returns each statement's rows
    /// (every value as text).
    public static func execute(_ database: String, key: ShellKey, compatibility3: Bool, _ statements: [String]) throws -> [[[String]]] {
        try requireAvailable()
        let keyText: String
        switch key {
        case .passphrase(let text): keyText = "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
        case .hex(let digits): keyText = "\"x'\(digits)'\""
        }
        let result = try run(["op": "execute", "db": database, "key": keyText, "compat3": compatibility3, "statements": statements])
        if let error = result["error"] as? String { throw SQLCipher4Error(message: error) }
        return result["results"] as? [[[String]]] ?? []
    }

    private static func requireAvailable() throws {
        if let unavailableReason {
            throw SQLCipher4Error(message: "SQLCipher 4 (PyPI sqlcipher3-binary) is not available: \(unavailableReason) (SQLCIPHER4_INTEROP_OPTIONAL=1 skips the interop tests outside CI)")
        }
    }

    private static func run(_ request: [String: Any]) throws -> [String: Any] {
        guard FileManager.default.isExecutableFile(atPath: python) else { throw SQLCipher4Error(message: "no virtual environment at \(venv)") }
        let input = String(decoding: try JSONSerialization.data(withJSONObject: request), as: UTF8.self)
        let result = try ProcessRunner.run(python, ["-c", script], input: input)
        guard result.status == 0, let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] else {
            throw SQLCipher4Error(message: "helper failed (\(result.status)): \(result.stderr.suffix(400))")
        }
        return object
    }

    private static let script = """
        import json, sys
        from sqlcipher3 import dbapi2 as sqlite
        request = json.load(sys.stdin)
        if request["op"] == "version":
            print(json.dumps({"version": sqlite.connect(":memory:").execute("PRAGMA cipher_version").fetchone()[0]}))
            sys.exit(0)
        try:
            connection = sqlite.connect(request["db"], isolation_level=None)
            connection.execute("PRAGMA key = " + request["key"])
            if request["compat3"]:
                connection.execute("PRAGMA cipher_compatibility = 3")
            results = []
            for statement in request["statements"]:
                rows = connection.execute(statement).fetchall()
                results.append([[("NULL" if value is None else str(value)) for value in row] for row in rows])
            connection.close()
            print(json.dumps({"results": results}))
        except Exception as error:
            print(json.dumps({"error": type(error).__name__ + ": " + str(error)}))
        """
}

/// The SQLCipher 4 helper failed.
public struct SQLCipher4Error: Error, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
