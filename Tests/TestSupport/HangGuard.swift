import Foundation

/// A hang guard for a child process: when the process is still running `limit` after the guard
/// was armed, it gets SIGQUIT (a Swift program's backtracer then prints its stack on standard
/// error, which the test reports; `rekey` resets the signal and just ends), and SIGKILL 10 s later
/// if it is still there. So a hung child becomes a failure, not a test run that never ends.
///
/// Not an order: `limit` is far above any run's time on a loaded machine, and a test that meets
/// it has failed. The caller keeps the guard until the process has ended (``disarm()``): the
/// guard's timers do not keep it alive.
public final class HangGuard: @unchecked Sendable {
    /// The limit of a child that should end by itself: 300 s, or TEST_HANG_LIMIT seconds (for
    /// stress sizes that make a run longer).
    public static let defaultLimit = Duration.seconds(TestKnobs.count("TEST_HANG_LIMIT", default: 300))

    private let child: ChildSignal
    private let lock = NSLock()
    // Only touched with `lock` held.
    private var ended = false
    private static let timers = DispatchQueue(label: "HangGuard.timers")
    private var fired = false

    /// Arms the guard for a started `process`.
    public init(_ process: Process, limit: Duration) {
        child = ChildSignal(process)
        let seconds = Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18
        // Weak: a guard (and with it the process, its pipes and their descriptors) must not live
        // on for the whole limit after its caller is done; kept alive, each process run held its
        // pipes' descriptors for 310 s, thousands at a time in a full run.
        // A serial queue: its timers fire on time while the global queues are busy or blocked.
        Self.timers.asyncAfter(deadline: .now() + seconds) { [weak self] in self?.signal(SIGQUIT) }
        Self.timers.asyncAfter(deadline: .now() + seconds + 10) { [weak self] in self?.signal(SIGKILL) }
    }

    private func signal(_ number: Int32) {
        lock.withLock {
            // Only while it is ours: a reaped process's PID can be reused (ChildSignal).
            guard !ended, child.send(number) else { return }
            fired = true
        }
    }

    /// Call once the process has ended (its exit reaped): the guard does nothing from then on.
    /// Returns `true` when the guard had to signal it (the process hung).
    @discardableResult
    public func disarm() -> Bool {
        lock.withLock {
            ended = true
            return fired
        }
    }
}
