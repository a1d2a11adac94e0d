import Foundation

/// Runs a program as a user would, and again and again killing it with SIGKILL at chosen instants.
public struct KillTrial: Sendable {
    public let executable: String
    public let arguments: [String]
    public let environment: [String: String]
    public let directory: String

    public init(executable: String, arguments: [String], environment: [String: String], directory: String) {
        self.executable = executable
        self.arguments = arguments
        self.environment = ProcessRunner.withPATH(environment)
        self.directory = directory
    }

    /// Runs the program to its end; returns what it printed and how long it took.
    public func uninterrupted() throws -> (result: ProcessResult, duration: Duration) {
        let start = ContinuousClock.now
        let result = try ProcessRunner.run(executable, arguments, environment: environment, currentDirectory: directory)
        return (result, ContinuousClock.now - start)
    }

    /// Starts the program, sends it SIGKILL after `delay`, and waits for it to end. Returns `true`
    /// when it was still running when the signal went out (killed mid-run).
    @discardableResult
    public func killed(after delay: Duration) throws -> Bool {
        let process = start()
        try process.run()
        let child = ChildSignal(process)
        // Not an order: the kill instant is meant to be arbitrary (the caller draws it at random);
        // the trial's verdict must hold wherever it lands.
        sleep(for: delay)
        let running = process.isRunning
        child.send(SIGKILL)  // never to a process or thread that got the PID of one that ended
        process.waitUntilExit()
        return running
    }

    /// A configured, not yet started process (output discarded).
    public func start(output: FileHandle? = nil) -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.standardOutput = output ?? FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        return process
    }

    /// An instant to kill at: mostly (4 in 5) inside `window` — where the work under test runs —
    /// or just after it (so that some kills land after the commit), and otherwise anywhere from
    /// the start to a little after `window` ends.
    public static func instant(in window: ClosedRange<Duration>, random: inout some RandomNumberGenerator) -> Duration {
        let (low, high) = (window.lowerBound.seconds, window.upperBound.seconds)
        let late = high + (high - low) * 0.15
        let seconds = Int.random(in: 0..<5, using: &random) < 4
            ? Double.random(in: low...max(low, late), using: &random)
            : Double.random(in: 0...(late + 0.01), using: &random)
        return .nanoseconds(Int64(seconds * 1e9))
    }
}

/// Sleeps the calling thread for `duration`. For random kill instants and for pacing only: a test
/// never takes an order from it (it waits for a line, a count, a hook or the pausing test VFS).
public func sleep(for duration: Duration) {
    let microseconds = duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
    if microseconds > 0 { usleep(useconds_t(clamping: microseconds)) }
}

extension Duration {
    /// The duration in seconds.
    public var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// A seeded random number generator (SplitMix64), so that a crash schedule can be replayed from
/// the seed a test prints.
public struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
