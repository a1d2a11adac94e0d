/// The bounds of a fleet run's settings, defined once for the library and for the `rekey`
/// command, which refuses values outside them.
///
/// ```swift
/// let jobs = 8, seconds = 2.5  // say, from a configuration file
/// guard FleetLimits.jobs.contains(jobs), let timeout = FleetLimits.busyTimeout(seconds: seconds) else {
///     fatalError("jobs must be in \(FleetLimits.jobs), the busy timeout in \(FleetLimits.busyTimeout)")
/// }
/// let report = FleetRotation(databases: databases, jobs: jobs, options: OpenOptions(busyTimeout: timeout)).run()
/// ```
public enum FleetLimits {
    /// How many databases a fleet run works on at once. ``FleetRotation`` and
    /// ``FleetInspection`` clamp their `jobs` into this range.
    public static let jobs: ClosedRange<Int> = 1...256

    /// How many threads one page re-encryption may use (``OpenOptions/rotationThreads``, which
    /// is clamped into this range).
    public static let rotationThreads: ClosedRange<Int> = 1...OpenOptions.maximumRotationThreads

    /// How long to wait for another process's lock: from none to one day.
    public static let busyTimeout: ClosedRange<Duration> = .zero ... .seconds(86_400)

    /// A busy timeout given in seconds (as on a command line), to the millisecond; `nil` when it is
    /// not a number or outside ``busyTimeout``.
    public static func busyTimeout(seconds: Double) -> Duration? {
        let lower = Double(busyTimeout.lowerBound.components.seconds)
        let upper = Double(busyTimeout.upperBound.components.seconds)
        guard seconds >= lower && seconds <= upper else { return nil }
        return .milliseconds(Int64(seconds * 1000))
    }
}
