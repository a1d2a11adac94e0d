import Foundation

/// The signals tests take their order from instead of a sleep: a child's output lines as they
/// arrive, and a count of completed operations.
///
/// Every wait here has a `limit`: a guard against a hang (the test fails then), never the
/// source of an order.

/// One line a child printed, and when the test process read it.
public struct OutputLine: Sendable {
    public let text: String
    public let at: ContinuousClock.Instant
}

/// Reads a pipe line by line on a thread of its own while the child runs, so that a test can
/// wait for a line (`committed 3`, `rotated …`) instead of sleeping.
public final class OutputLines: @unchecked Sendable {
    private let condition = NSCondition()
    // Invariant: the fields below are only touched with `condition` held.
    private var received: [OutputLine] = []
    private var ended = false
    private var raw = Data()

    /// Starts reading `handle` (the read end of a pipe whose write end the test has closed).
    public init(_ handle: FileHandle) {
        Thread { [self] in
            var buffer = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                var complete: [OutputLine] = []
                while let end = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    complete.append(OutputLine(text: String(decoding: buffer[buffer.startIndex..<end], as: UTF8.self), at: .now))
                    buffer.removeSubrange(buffer.startIndex...end)
                }
                condition.withLock {
                    raw.append(chunk)
                    received += complete
                    condition.broadcast()
                }
            }
            condition.withLock {
                if !buffer.isEmpty { received.append(OutputLine(text: String(decoding: buffer, as: UTF8.self), at: .now)) }
                ended = true
                condition.broadcast()
            }
        }.start()
    }

    /// The lines so far.
    public var lines: [OutputLine] { condition.withLock { received } }

    /// Everything read so far, as text.
    public var text: String { condition.withLock { String(decoding: raw, as: UTF8.self) } }

    /// `true` once the child closed its end (it exited).
    public var isEnded: Bool { condition.withLock { ended } }

    /// How many lines so far start with `prefix`.
    public func count(prefix: String) -> Int { condition.withLock { received.count { $0.text.hasPrefix(prefix) } } }

    /// Blocks until `predicate` accepts the lines so far; `false` when the output ended first
    /// (the child exited) or `limit` passed (a hang guard).
    @discardableResult
    public func wait(limit: Duration = .seconds(60), until predicate: ([OutputLine]) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(limit.seconds)
        return condition.withLock {
            while !predicate(received) {
                if ended || !condition.wait(until: deadline) { return predicate(received) }
            }
            return true
        }
    }

    /// Blocks until at least `target` lines start with `prefix` (see ``wait(limit:until:)``).
    @discardableResult
    public func wait(forCount target: Int, of prefix: String, limit: Duration = .seconds(60)) -> Bool {
        wait(limit: limit) { lines in lines.count { $0.text.hasPrefix(prefix) } >= target }
    }

    /// ``wait(forCount:of:limit:)`` for async code: the blocking wait runs on a thread of its own,
    /// so that no thread of the cooperative pool waits.
    public func arrived(count target: Int, of prefix: String, limit: Duration = .seconds(600)) async -> Bool {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: self.wait(forCount: target, of: prefix, limit: limit)) }.start()
        }
    }

    /// Blocks until the child closed its end of the pipe and every line was read (a join).
    public func waitForEnd() {
        condition.withLock { while !ended { condition.wait() } }
    }
}

/// A count of completed operations that a test can wait on ("the writer has committed 20 more
/// rows"), instead of sleeping for as long as they usually take.
public final class ProgressCounter: @unchecked Sendable {
    private let condition = NSCondition()
    private var count = 0

    public init() {}

    /// One more operation completed.
    public func increment() {
        condition.withLock {
            count += 1
            condition.broadcast()
        }
    }

    public var value: Int { condition.withLock { count } }

    /// Blocks until the count reaches `target`; `false` when `limit` passed first (a hang guard).
    @discardableResult
    public func wait(untilAtLeast target: Int, limit: Duration = .seconds(60)) -> Bool {
        let deadline = Date().addingTimeInterval(limit.seconds)
        return condition.withLock {
            while count < target {
                if !condition.wait(until: deadline) { return count >= target }
            }
            return true
        }
    }

    /// ``wait(untilAtLeast:limit:)`` for async code: the blocking wait runs on a thread of its
    /// own, so that no thread of the cooperative pool waits. The counted operations usually run
    /// as tasks too, and in a full run the synchronous tests of other suites can hold both
    /// cooperative threads of a 2-core machine for a minute or more (the crash tests wait on child
    /// processes): the hang guard is 10 minutes, so that a starved task is not taken for a hung one.
    public func reached(_ target: Int, limit: Duration = .seconds(600)) async -> Bool {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: self.wait(untilAtLeast: target, limit: limit)) }.start()
        }
    }
}
