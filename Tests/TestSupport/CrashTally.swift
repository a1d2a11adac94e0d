/// What a check found after one crash trial (a kill -9 or a simulated power cut).
public enum CrashOutcome: Sendable {
    /// The file opens with the key (or plaintext state) it had before, intact.
    case openedWithOld
    /// The file opens with the new key, intact.
    case openedWithNew
    /// No configured key opens it, or it fails `integrity_check`.
    case unopenable
    /// It opens, but its content differs from before.
    case checksumMismatch
}

/// The outcomes of the crash trials of one path, and their row in the stress table.
public struct CrashTally: Sendable, CustomStringConvertible {
    /// The path's name in the table.
    public let path: String
    public private(set) var trials = 0
    public private(set) var openedWithOld = 0
    public private(set) var openedWithNew = 0
    public private(set) var unopenable = 0
    public private(set) var checksumMismatches = 0

    public init(path: String) { self.path = path }

    /// Counts one trial.
    public mutating func record(_ outcome: CrashOutcome) {
        trials += 1
        switch outcome {
        case .openedWithOld: openedWithOld += 1
        case .openedWithNew: openedWithNew += 1
        case .unopenable: unopenable += 1
        case .checksumMismatch: checksumMismatches += 1
        }
    }

    /// Adds the trials of `other` (another lane of the same path).
    public mutating func add(_ other: CrashTally) {
        trials += other.trials
        openedWithOld += other.openedWithOld
        openedWithNew += other.openedWithNew
        unopenable += other.unopenable
        checksumMismatches += other.checksumMismatches
    }

    /// The row `scripts/stress.sh` collects from the test output:
    /// `crash-table|path|trials|old|new|unopenable|mismatches`.
    public var row: String {
        "crash-table|\(path)|\(trials)|\(openedWithOld)|\(openedWithNew)|\(unopenable)|\(checksumMismatches)"
    }

    public var description: String {
        "\(path): \(trials) trials, opened with old key \(openedWithOld), with new key \(openedWithNew), unopenable \(unopenable), checksum mismatches \(checksumMismatches)"
    }
}
