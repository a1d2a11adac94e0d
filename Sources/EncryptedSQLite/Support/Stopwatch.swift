/// Measures durations with the monotonic clock.
struct Stopwatch {
    private let clock = ContinuousClock()
    private let start: ContinuousClock.Instant

    init() { start = clock.now }

    /// The time since the stopwatch started.
    var elapsed: Duration { clock.now - start }
}

extension Duration {
    /// The duration in milliseconds, as a floating point number.
    public var milliseconds: Double {
        Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15
    }
}
