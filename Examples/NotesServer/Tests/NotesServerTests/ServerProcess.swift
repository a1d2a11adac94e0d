import Foundation

/// One `notes-server serve` process on 127.0.0.1 (a port the kernel picks) over a new encrypted
/// database, in a folder of its own with a Keys file and a random 256-bit key: the server the
/// tests drive, as its unit would run it. Stopped with SIGKILL when released, if still running.
///
/// The binary is the one `swift test` built beside the test binary (`NOTES_SERVER` names another).
final class ServerProcess {
    /// The folder with `notes.sqlite`, `Keys`, `k0.key` and `server.log`.
    let folder: URL
    /// The port it listens on, read from its log.
    private(set) var port = 0
    private let process = Process()

    /// Starts it with `serve`'s options plus `arguments`, and waits until it listens (its database is open then).
    init(_ arguments: [String] = []) throws {
        folder = FileManager.default.temporaryDirectory.appending(path: "notes-server-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let key = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        try write(key, to: "k0.key")
        try write("databases:\n  - path: notes.sqlite\n    keys:\n      - id: \"k0\"\n        file: k0.key\n        format: hex\n", to: "Keys")
        let log = folder.appending(path: "server.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let output = try FileHandle(forWritingTo: log)
        process.executableURL = Self.binary
        process.arguments = ["serve", "--db", "notes.sqlite", "--keys", "Keys", "--port", "0", "--readers", "2"] + arguments
        process.currentDirectoryURL = folder
        (process.standardOutput, process.standardError) = (output, output)
        try process.run()
        port = try waitForPort()
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(at: folder)
    }

    /// The server's log so far.
    var log: String { (try? String(contentsOf: folder.appending(path: "server.log"), encoding: .utf8)) ?? "" }

    /// The key, for the `sqlcipher` shell.
    var key: String { get throws { try String(contentsOf: folder.appending(path: "k0.key"), encoding: .utf8) } }

    /// Sends SIGTERM and waits, at most `bound`, for the process to end.
    /// - Returns: how long it took, or `nil` when it still runs after `bound` (then it is killed).
    func terminate(within bound: Duration) -> Duration? {
        let start = ContinuousClock.now
        kill(process.processIdentifier, SIGTERM)
        while process.isRunning {
            guard ContinuousClock.now - start < bound else {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                return nil
            }
            usleep(5_000)
        }
        return ContinuousClock.now - start
    }

    /// The exit status, once ended.
    var exitStatus: Int32 { process.terminationStatus }

    private func waitForPort() throws -> Int {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline, process.isRunning {
            if let line = log.split(separator: "\n").first(where: { $0.contains("listening on 127.0.0.1:") }),
               let port = Int(line.split(separator: ":").last ?? "") {
                return port
            }
            usleep(10_000)
        }
        throw StartFailure(log: log)
    }

    private func write(_ text: String, to name: String) throws {
        let url = folder.appending(path: name)
        try Data(text.utf8).write(to: url)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
    }

    /// The server did not start listening: its log says why.
    struct StartFailure: Error, CustomStringConvertible {
        let log: String
        var description: String { "notes-server did not start:\n\(log)" }
    }

    private static var binary: URL {
        if let path = ProcessInfo.processInfo.environment["NOTES_SERVER"] { return URL(filePath: path) }
        return URL(filePath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appending(path: "notes-server")
    }
}
