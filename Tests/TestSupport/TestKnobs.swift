import Foundation

/// Numbers a test reads from the environment so that stress runs can raise them and a failed run
/// can be replayed (Tests/README.md lists the variables).
public enum TestKnobs {
    /// The integer in the environment variable `variable`, or `value` when it is unset or not a number.
    public static func count(_ variable: String, default value: Int) -> Int {
        Int(ProcessInfo.processInfo.environment[variable] ?? "") ?? value
    }

    /// The seed in the environment variable `variable` (to replay a run), or a new random one.
    public static func seed(_ variable: String) -> UInt64 {
        UInt64(ProcessInfo.processInfo.environment[variable] ?? "") ?? UInt64.random(in: 1...UInt64(UInt32.max))
    }
}
