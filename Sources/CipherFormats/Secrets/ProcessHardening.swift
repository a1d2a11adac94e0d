import Foundation

/// Hardens the running process against leaking key material the way `ssh-agent` and `gpg-agent`
/// do: no core dumps, no inspection by other processes of the same user, and no memory contents
/// in crash output.
///
/// Call it once, first thing in `main`, before any key is read. `rekey` does. What it does:
///
/// - **Not dumpable** (`prctl(PR_SET_DUMPABLE, 0)`): the kernel writes no core dump, and other
///   processes of the same user can no longer attach a debugger (`gcore`, `ptrace`) or read
///   `/proc/<pid>/mem` and `/proc/<pid>/environ`; only root (`CAP_SYS_PTRACE`) can.
/// - **No core files** (`RLIMIT_CORE` set to 0, soft and hard limit).
/// - **Fatal signals end the process** (`SIGSEGV`, `SIGBUS`, `SIGILL`, `SIGFPE`, `SIGABRT`,
///   `SIGTRAP`, `SIGQUIT` reset to their default action). Swift's crash backtracer would otherwise
///   print the crashed thread's registers and the memory they point at, which can be key bytes,
///   and it lets a signal sent by another process (`kill -SEGV`) return, so work carries on.
///   With the defaults a crash prints nothing and the process ends, killed by the signal.
///
/// Independently of this call, the library keeps key material in buffers of their own pages,
/// locked in memory where `RLIMIT_MEMLOCK` allows (``unlockedSecretBuffers`` counts those it could
/// not lock), left out of core dumps (`MADV_DONTDUMP`), zeroed when released and zeroed at exit.
///
/// ```swift
/// let hardening = ProcessHardening.apply()
/// if !hardening.problems.isEmpty { logger.warning("hardening: \(hardening)") }
/// ```
public enum ProcessHardening {
    /// The signals whose default action ends the process and which Swift's backtracer catches.
    public static let fatalSignals: [Int32] = [SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGQUIT]

    /// What ``apply(resetFatalSignals:)`` achieved.
    ///
    /// ```swift
    /// let report = ProcessHardening.apply()
    /// precondition(report.nonDumpable && report.coreDumpsDisabled)
    /// ```
    public struct Report: Sendable, CustomStringConvertible {
        /// The process is no longer dumpable.
        public let nonDumpable: Bool
        /// `RLIMIT_CORE` is 0.
        public let coreDumpsDisabled: Bool
        /// The fatal signals have their default action.
        public let fatalSignalsReset: Bool
        /// `RLIMIT_MEMLOCK` in bytes (`nil`: unlimited): how much key material can be locked in memory.
        public let memoryLockLimit: UInt64?
        /// What could not be done, in words; empty when everything worked.
        public let problems: [String]

        /// One line: what is in place, and any problem.
        public var description: String {
            var parts = ["non-dumpable: \(nonDumpable)", "core dumps off: \(coreDumpsDisabled)", "fatal signals reset: \(fatalSignalsReset)"]
            parts.append("memory lock limit: " + (memoryLockLimit.map { "\($0) bytes" } ?? "unlimited"))
            if !problems.isEmpty { parts.append("problems: " + problems.joined(separator: "; ")) }
            return parts.joined(separator: ", ")
        }
    }

    /// Makes the process non-dumpable, sets `RLIMIT_CORE` to 0 and, unless `resetFatalSignals` is
    /// `false` (for an app that installs crash handlers of its own, which must then print no
    /// memory), gives the fatal signals their default action. Never throws: what fails is listed
    /// in the report's ``Report/problems``. Safe to call more than once.
    @discardableResult
    public static func apply(resetFatalSignals: Bool = true) -> Report {
        var problems: [String] = []
        let nonDumpable = processControl(setDumpable, 0) == 0
        if !nonDumpable { problems.append("prctl(PR_SET_DUMPABLE, 0) failed: \(String(cString: strerror(errno)))") }
        var noCore = rlimit(rlim_cur: 0, rlim_max: 0)
        let coreDumpsDisabled = setrlimit(Int32(RLIMIT_CORE.rawValue), &noCore) == 0
        if !coreDumpsDisabled { problems.append("setrlimit(RLIMIT_CORE, 0) failed: \(String(cString: strerror(errno)))") }
        var signalsReset = false
        if resetFatalSignals {
            signalsReset = true
            // A zeroed sigaction is SIG_DFL with no flags.
            var defaultAction = sigaction()
            for signalNumber in fatalSignals where sigaction(signalNumber, &defaultAction, nil) != 0 {
                signalsReset = false
                problems.append("signal \(signalNumber) could not be reset: \(String(cString: strerror(errno)))")
            }
        }
        var lockLimit = rlimit()
        var memoryLockLimit: UInt64?
        if getrlimit(memoryLockResource, &lockLimit) == 0, lockLimit.rlim_cur != rlim_t.max {
            memoryLockLimit = UInt64(lockLimit.rlim_cur)
            if lockLimit.rlim_cur == 0 {
                problems.append("RLIMIT_MEMLOCK is 0: key material cannot be locked in memory and may be swapped (it is still kept out of core dumps and zeroed)")
            }
        }
        return Report(nonDumpable: nonDumpable, coreDumpsDisabled: coreDumpsDisabled, fatalSignalsReset: signalsReset,
                      memoryLockLimit: memoryLockLimit, problems: problems)
    }

    /// `true` while the process is dumpable (`prctl(PR_GET_DUMPABLE)`).
    public static var isDumpable: Bool { processControl(getDumpable, 0) != 0 }

    // <linux/prctl.h> and <sys/resource.h> values the Glibc module does not export.
    private static let getDumpable: Int32 = 3
    private static let setDumpable: Int32 = 4
    private static let memoryLockResource: Int32 = 8

    /// glibc's `prctl`, which Swift cannot import (it is variadic); every option used here takes
    /// integer arguments only.
    private static func processControl(_ option: Int32, _ argument: UInt) -> Int32 {
        typealias PrctlFunction = @convention(c) (Int32, UInt, UInt, UInt, UInt) -> Int32
        let function = unsafeBitCast(dlsym(UnsafeMutableRawPointer(bitPattern: 0), "prctl"), to: PrctlFunction.self)
        return function(option, argument, 0, 0, 0)
    }

    /// How many key-material buffers could not be locked in memory so far (the `RLIMIT_MEMLOCK`
    /// limit was reached); they are still left out of core dumps and zeroed, but may be swapped.
    public static var unlockedSecretBuffers: Int { SecretMemory.unlockedAllocations }
}
