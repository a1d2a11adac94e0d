import Foundation

/// Signals one child process, and never another that later got its PID.
///
/// Once a child has ended and Foundation has reaped it, its PID is free, and on a machine whose
/// `pid_max` is 32,768 (this CI machine's) a full run hands it out again within seconds, to a
/// process or to a thread: `kill` on a thread's id ends the whole process the thread belongs to.
/// A kill at a random instant that landed after the child's end could so end the test process
/// itself, with no message (a full-suite CI run stopped that way in `MigrationKillTests`).
///
/// Made right after `run()`, it holds a pidfd of the child (`pidfd_open`, found at run time in the
/// C library: Glibc's module does not declare it), through which a signal reaches that process or
/// none. Where the C library has no pidfd functions it falls back to `kill` while Foundation still
/// reports the child running.
///
/// ```swift
/// try process.run()
/// let child = ChildSignal(process)
/// sleep(for: instant)
/// child.send(SIGKILL)
/// process.waitUntilExit()
/// ```
public final class ChildSignal: @unchecked Sendable {
    private let process: Process
    private let lock = NSLock()
    // Only touched with `lock` held: the pidfd, or -1 once closed or when none could be had.
    private var descriptor: Int32

    /// Takes a pidfd of `process`, which must have been started (`run()`) and not waited for.
    public init(_ process: Process) {
        self.process = process
        var descriptor: Int32 = -1
        if let open = Pidfd.open {
            descriptor = open(process.processIdentifier, 0)
            // Reaped before the pidfd was taken: the PID may be another process's by now.
            if descriptor >= 0, !process.isRunning {
                close(descriptor)
                descriptor = -1
            }
        }
        self.descriptor = descriptor
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    /// Sends `number` to the child if it has not ended; `true` when it was sent.
    @discardableResult
    public func send(_ number: Int32) -> Bool {
        lock.withLock {
            if descriptor >= 0, let send = Pidfd.sendSignal {
                return send(descriptor, number, nil, 0) == 0  // ESRCH once the child has ended
            }
            if Pidfd.open == nil, process.isRunning {
                return kill(process.processIdentifier, number) == 0
            }
            return false
        }
    }
}

/// The C library's pidfd functions (glibc 2.36 and later), looked up at run time.
private enum Pidfd {
    typealias Open = @convention(c) (pid_t, UInt32) -> Int32
    typealias SendSignal = @convention(c) (Int32, Int32, UnsafeMutableRawPointer?, UInt32) -> Int32

    static let open: Open? = dlsym(nil, "pidfd_open").map { unsafeBitCast($0, to: Open.self) }
    static let sendSignal: SendSignal? = dlsym(nil, "pidfd_send_signal").map { unsafeBitCast($0, to: SendSignal.self) }
}
