import Foundation
import KeyConfiguration

/// One database's state in a ``FleetInspection``, or why it could not be read.
///
/// ```swift
/// for outcome in report.outcomes {
///     print(outcome.path, outcome.state?.openedWithKeyID ?? outcome.failure?.description ?? "")
/// }
/// ```
public struct FleetInspectionOutcome: Sendable {
    /// The database path.
    public let path: String
    /// Its state (see ``DatabaseInspection/state(path:keys:busyTimeout:)``), or the failure: its
    /// key list could not be built, or no key opens it, it is missing, locked, ….
    public let result: Result<DatabaseState, FleetFailure>
    /// How long this database took.
    public let duration: Duration

    /// The state, or `nil` when it failed.
    public var state: DatabaseState? { try? result.get() }

    /// The failure, or `nil` when the state was read.
    public var failure: FleetFailure? {
        if case .failure(let failure) = result { return failure }
        return nil
    }
}

/// The result of a ``FleetInspection``: every database's state or failure, in the order given.
///
/// ```swift
/// let report = FleetInspection(databases: FleetDatabase.all(in: keysFile), jobs: 4).run()
/// print("\(report.needingRotation) of \(report.outcomes.count) need rotation")
/// ```
public struct FleetInspectionReport: Sendable {
    /// The outcomes, in the order the databases were given.
    public let outcomes: [FleetInspectionOutcome]
    /// The whole run.
    public let duration: Duration
    /// How many workers ran at once.
    public let jobs: Int

    /// The states that were read, in order.
    public var states: [DatabaseState] { outcomes.compactMap(\.state) }
    /// The failed databases with their reasons, in order.
    public var failures: [(path: String, failure: FleetFailure)] {
        outcomes.compactMap { outcome in outcome.failure.map { (outcome.path, $0) } }
    }
    /// Databases that are not on their current key (or settings) and need rotation.
    public var needingRotation: Int { states.filter(\.needsRotation).count }
    /// `true` when every database's state was read.
    public var succeeded: Bool { outcomes.allSatisfy { $0.failure == nil } }
}

/// Reads the state of many databases — which key opens each, whether and how it would be rotated,
/// its journal mode, page size and count, KDF iterations and size — without changing any of them:
/// `rekey status` over a fleet.
///
/// Each database is inspected as ``DatabaseInspection/state(path:keys:busyTimeout:)`` does (opened
/// read-only with its key list, never rotated). Databases are independent: one failing does not
/// stop the others, and the report keeps the order they were given in. With `jobs` above 1 they
/// are read on that many threads, like ``FleetRotation``.
///
/// ```swift
/// let databases = try DatabaseSelection.all.databases(inKeysFileAt: "Keys")
/// let report = FleetInspection(databases: databases).run { _, outcome in
///     if let state = outcome.state { print("\(state.path): key \(state.openedWithKeyID)") }
/// }
/// print("\(report.needingRotation) need rotation, \(report.failures.count) failed")
/// ```
public struct FleetInspection: Sendable {
    /// The databases, in the order their outcomes are reported.
    public let databases: [FleetDatabase]
    /// How many databases are read at once (within ``FleetLimits/jobs``).
    public let jobs: Int
    /// How long to wait for another process's lock on each database.
    public let busyTimeout: Duration

    /// An inspection of `databases`, `jobs` at a time (clamped into ``FleetLimits/jobs``; the
    /// default, 1, reports them one after the other in order).
    public init(databases: [FleetDatabase], jobs: Int = 1, busyTimeout: Duration = .seconds(5)) {
        self.databases = databases
        self.jobs = min(max(FleetLimits.jobs.lowerBound, jobs), FleetLimits.jobs.upperBound)
        self.busyTimeout = busyTimeout
    }

    /// Reads every database's state. `progress` is called once per finished database, one call
    /// at a time (from worker threads), with the run's state and that database's outcome.
    public func run(progress: @escaping @Sendable (FleetProgress, FleetInspectionOutcome) -> Void = { _, _ in }) -> FleetInspectionReport {
        let run = FleetWorkers(paths: databases.map(\.path), jobs: jobs).run(
            isFailure: { $0.failure != nil },
            work: { [self] index, _ in inspect(databases[index]) },
            progress: progress)
        return FleetInspectionReport(outcomes: run.outcomes, duration: run.duration, jobs: run.workers)
    }

    /// The health of each database whose key list could be built (see ``DatabaseHealth``), in
    /// order, with its `max_key_age_days`; read-only, one after the other.
    public static func health(of databases: [FleetDatabase], busyTimeout: Duration = .seconds(5), now: Date = Date()) -> [Result<DatabaseHealth, EncryptedDatabaseError>] {
        databases.compactMap { database in
            guard case .success(let keys) = database.keys else { return nil }
            return Result { () throws(EncryptedDatabaseError) in
                try DatabaseHealth.check(path: database.path, keys: keys, maximumKeyAgeDays: database.maximumKeyAgeDays, now: now, busyTimeout: busyTimeout)
            }
        }
    }

    private func inspect(_ database: FleetDatabase) -> FleetInspectionOutcome {
        let stopwatch = Stopwatch()
        let result: Result<DatabaseState, FleetFailure>
        switch database.keys {
        case .failure(let error):
            result = .failure(.keys(error))
        case .success(let keys):
            do {
                result = .success(try DatabaseInspection.state(path: database.path, keys: keys, busyTimeout: busyTimeout))
            } catch {
                result = .failure(.database(error))
            }
        }
        return FleetInspectionOutcome(path: database.path, result: result, duration: stopwatch.elapsed)
    }
}
