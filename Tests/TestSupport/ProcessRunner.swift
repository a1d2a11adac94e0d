import Foundation

/// The result of running a child process to completion.
public struct ProcessResult: Sendable {
    /// The exit status (or 128 + signal number when killed by a signal).
    public let status: Int32
    /// Everything written to standard output.
    public let stdout: String
    /// Everything written to standard error.
    public let stderr: String
}

/// Runs child processes with given standard input and environment.
public enum ProcessRunner {
    /// Runs `executable` with `arguments`, feeding `input` on standard input. A child still running
    /// after `hangLimit` is stopped (``HangGuard``): its status is then 131 (SIGQUIT) or 137, and
    /// its standard error ends with its backtrace and a note.
    /// - Throws: ``SecretInArgumentsError`` when an argument holds a secret of ``TestSecrets``.
    public static func run(
        _ executable: String, _ arguments: [String], input: String = "", environment: [String: String]? = nil,
        currentDirectory: String? = nil, hangLimit: Duration = HangGuard.defaultLimit
    ) throws -> ProcessResult {
        // Keys go on standard input or in the environment, never in argv (visible to every user).
        guard TestSecrets.firstLeak(in: arguments) == nil else { throw SecretInArgumentsError(executable: executable) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        if let currentDirectory { process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory) }
        let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        let hangGuard = HangGuard(process, limit: hangLimit)
        // A child that stops reading early (the shells stop at the first error with -bail) must
        // not kill the test process with SIGPIPE: ignore the signal and the write's EPIPE.
        _ = ignoreBrokenPipes
        try? stdin.fileHandleForWriting.write(contentsOf: Data(input.utf8))
        try? stdin.fileHandleForWriting.close()
        // Read both pipes concurrently so that neither can fill up and block the child.
        let errorData = LockedData()
        let errorRead = DispatchSemaphore(value: 0)
        let reader = Thread {
            errorData.set(stderr.fileHandleForReading.readDataToEndOfFile())
            errorRead.signal()
        }
        reader.start()
        let outData = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let hung = hangGuard.disarm()
        errorRead.wait()  // a join: the reader has read standard error to its end
        let status = process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
        let hangNote = hung ? "\n[test: \(executable) ran longer than \(hangLimit) and was stopped with SIGQUIT; its backtrace is above]\n" : ""
        return ProcessResult(
            status: status, stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errorData.value, as: UTF8.self) + hangNote)
    }

    /// Ignores SIGPIPE for the whole test process, once.
    private static let ignoreBrokenPipes: Void = { signal(SIGPIPE, SIG_IGN) }()

    /// This process's PATH, or `/usr/bin:/bin` when it has none: what children are given to find
    /// the tools they run.
    public static var inheritedPATH: String { ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin" }

    /// `environment` with ``inheritedPATH`` as its PATH unless it names one itself.
    public static func withPATH(_ environment: [String: String]) -> [String: String] {
        var environment = environment
        if environment["PATH"] == nil { environment["PATH"] = inheritedPATH }
        return environment
    }

    /// Finds an executable on the PATH.
    public static func which(_ name: String) -> String? {
        for folder in inheritedPATH.split(separator: ":") {
            let candidate = "\(folder)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}

private final class LockedData: @unchecked Sendable {
    private let lock = NSLock()
    private var data: Data?
    func set(_ value: Data) { lock.withLock { data = value } }
    var value: Data { lock.withLock { data ?? Data() } }
}
