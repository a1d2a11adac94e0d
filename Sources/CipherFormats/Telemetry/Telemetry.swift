import Foundation
import Metrics
import Tracing

/// The library's one seam to swift-metrics and swift-distributed-tracing: every call site is one
/// line (`Telemetry.opened(…)`, `try Telemetry.span(…) { … }`).
///
/// Nothing is emitted unless the application bootstraps a backend (`MetricsSystem.bootstrap`,
/// `InstrumentationSystem.bootstrap`); without one the packages' no-op handlers take the calls
/// (the cost is measured in Benchmarks/README.md). Dimensions and attributes carry key ids,
/// strategies and outcomes, spans also the database path; never key material.
///
/// The metrics and spans are listed for users in the EncryptedSQLite documentation's
/// "Observability" section (EncryptedSQLite.md), their one home.
package enum Telemetry {
    /// An open finished: `outcome` is `current`, `rotated` or `needs_rotation`.
    package static func opened(outcome: String, keysTried: Int, duration: Duration) {
        Counter(label: "encryptedsqlite_opens_total", dimensions: [("outcome", outcome)]).increment()
        Recorder(label: "encryptedsqlite_open_keys_tried").record(keysTried)
        Metrics.Timer(label: "encryptedsqlite_open_duration", dimensions: [("outcome", outcome)]).recordNanoseconds(duration.nanoseconds)
    }

    /// The library ran PBKDF2 over a passphrase (SQLCipher's own runs inside the engine are not seen).
    package static func kdfRun() {
        Counter(label: "encryptedsqlite_kdf_runs_total").increment()
    }

    /// A rotation committed and verified.
    package static func rotated(method: String, fromKey: String, toKey: String, bytes: Int64, duration: Duration) {
        Counter(label: "encryptedsqlite_rotations_total", dimensions: [("method", method), ("from_key", fromKey), ("to_key", toKey)]).increment()
        Counter(label: "encryptedsqlite_rotation_bytes_total", dimensions: [("method", method)]).increment(by: bytes)
        Metrics.Timer(label: "encryptedsqlite_rotation_duration", dimensions: [("method", method)]).recordNanoseconds(duration.nanoseconds)
    }

    /// A rotation's or a copy's verification failed.
    package static func verificationFailed(keyID: String) {
        Counter(label: "encryptedsqlite_verification_failures_total", dimensions: [("key", keyID)]).increment()
    }

    /// An operation gave up waiting for another connection's lock.
    package static func busy(operation: String) {
        Counter(label: "encryptedsqlite_busy_total", dimensions: [("operation", operation)]).increment()
    }

    /// A running database met its file rotated by another process (or database object) and
    /// followed it (`outcome` `followed`, `to_key` the key it is on now) or could not (`failed`).
    package static func followedRotation(fromKey: String, toKey: String?, outcome: String) {
        Counter(label: "encryptedsqlite_live_rekeys_total", dimensions: [("from_key", fromKey), ("to_key", toKey ?? "none"), ("outcome", outcome)]).increment()
    }

    /// Migrations were applied.
    package static func migrated(count: Int, duration: Duration) {
        Counter(label: "encryptedsqlite_migrations_applied_total").increment(by: count)
        Metrics.Timer(label: "encryptedsqlite_migration_duration").recordNanoseconds(duration.nanoseconds)
    }

    /// A backup was written.
    package static func backedUp(method: String, keyID: String, bytes: Int64, duration: Duration) {
        Counter(label: "encryptedsqlite_backups_total", dimensions: [("method", method), ("key", keyID)]).increment()
        Counter(label: "encryptedsqlite_backup_bytes_total", dimensions: [("method", method)]).increment(by: bytes)
        Metrics.Timer(label: "encryptedsqlite_backup_duration", dimensions: [("method", method)]).recordNanoseconds(duration.nanoseconds)
    }

    /// Runs `body` inside a span `encryptedsqlite.<name>` with `attributes` (key ids, paths,
    /// strategies: never material), recording a thrown error on the span and passing it to
    /// `failure` (to count it). Nested spans are its children.
    package static func span<T, E: Error>(_ name: String, _ attributes: KeyValuePairs<String, String>, failure: (E) -> Void = { _ in }, _ body: () throws(E) -> T) throws(E) -> T {
        let span = startSpan("encryptedsqlite." + name)
        defer { span.end() }
        if span.isRecording {
            for (key, value) in attributes { span.attributes[key] = value }
        }
        let result: Result<T, E> = ServiceContext.withValue(span.context) { Result { () throws(E) -> T in try body() } }
        if case .failure(let error) = result {
            failure(error)
            span.recordError(error)
            span.setStatus(SpanStatus(code: .error))
        }
        return try result.get()
    }
}

extension Duration {
    /// The duration in whole nanoseconds (saturating).
    package var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? .max : product.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue
    }
}
