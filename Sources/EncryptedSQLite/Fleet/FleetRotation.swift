import DurableFiles
import Foundation
import KeyConfiguration

/// One database of a fleet, with its key list or the reason its key list could not be built (a
/// fleet run reports that file as failed and goes on with the others).
///
/// ```swift
/// let keysFile = try KeysFile.load(path: "Keys")
/// let one = FleetDatabase.named("/srv/tenants/a.sqlite", in: keysFile)
/// let report = FleetRotation(databases: [one]).run()
/// ```
public struct FleetDatabase: Sendable {
    /// The database path.
    public let path: String
    /// Its key list, or the configuration error.
    public let keys: Result<KeyList, KeyConfigurationError>
    /// The maximum age of its current key in days (the Keys file's `max_key_age_days`), or `nil`.
    public var maximumKeyAgeDays: Int?

    /// A database and its key list, and optionally the maximum age of its current key.
    public init(path: String, keys: KeyList, maximumKeyAgeDays: Int? = nil) {
        self.path = path
        self.keys = .success(keys)
        self.maximumKeyAgeDays = maximumKeyAgeDays
    }

    /// A database whose key list could not be built.
    public init(path: String, keyError: KeyConfigurationError) {
        self.path = path
        self.keys = .failure(keyError)
    }

    /// Every database `keysFile` names (exact entries and glob matches, see
    /// `KeysFile/allDatabasePaths()`), each with its key list.
    public static func all(in keysFile: KeysFile, environment: [String: String]? = nil) -> [FleetDatabase] {
        // One lookup for the whole fleet: each entry's path is resolved once, not once per file.
        let lookup = keysFile.entryLookup()
        return keysFile.allDatabasePaths().map { named($0, in: keysFile, environment: environment, lookup: lookup) }
    }

    /// `path` with its key list, its entry found through `lookup` (made once for many paths).
    static func named(_ path: String, in keysFile: KeysFile, environment: [String: String]?, lookup: KeysFile.EntryLookup) -> FleetDatabase {
        do {
            let (keys, entry) = try keysFile.keyList(forDatabase: path, environment: environment, lookup: lookup)
            return FleetDatabase(path: path, keys: keys, maximumKeyAgeDays: entry.maximumKeyAgeDays)
        } catch {
            return FleetDatabase(path: path, keyError: error)
        }
    }

    /// `path` with its key list from `keysFile`.
    public static func named(_ path: String, in keysFile: KeysFile, environment: [String: String]? = nil) -> FleetDatabase {
        do {
            return FleetDatabase(path: path, keys: try keysFile.keyList(forDatabase: path, environment: environment),
                                 maximumKeyAgeDays: keysFile.entry(forDatabase: path)?.maximumKeyAgeDays)
        } catch {
            return FleetDatabase(path: path, keyError: error)
        }
    }
}

/// Why one database of a fleet failed.
///
/// ```swift
/// for (path, failure) in report.failures {
///     print("\(path): \(failure.kind): \(failure.reason)")
/// }
/// ```
public enum FleetFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// Its key list could not be built.
    case keys(KeyConfigurationError)
    /// Opening, checking or rotating it failed.
    case database(EncryptedDatabaseError)

    /// The underlying error's description (file, key ids, what to do; never key material).
    public var description: String {
        switch self {
        case .keys(let error): return error.description
        case .database(let error): return error.description
        }
    }

    /// What kind of failure it is, as a stable label: `keys` for a key list that could not be
    /// built, else the ``EncryptedDatabaseError/category`` (`missingFile`, `busy`, …).
    public var kind: String {
        switch self {
        case .keys: return "keys"
        case .database(let error): return error.category.rawValue
        }
    }

    /// A short reason for a run's summary: what is wrong with the file (`missing`, `empty file`,
    /// `locked by another process`, …), or the start of the description.
    public var reason: String {
        switch self {
        case .keys: return "key configuration (\(description.prefix(160)))"
        case .database(let error):
            switch error {
            case .fileNotFound: return "missing"
            case .notARegularFile: return "not a regular file"
            case .emptyFile: return "empty file"
            case .fileTooShort: return "too short to be a database"
            case .plaintextDatabase: return "unencrypted, and its key list has no plaintext entry"
            case .noKeyOpens(_, let tried, _): return "no configured key opens it (tried \(tried.joined(separator: ", ")))"
            case .sqlcipher4File(_, let keyID, _): return "a SQLCipher 4 file (key \"\(keyID)\" is right for it)"
            case .busy: return "locked by another process"
            default: return "\(error.category.rawValue): \(String(error.description.prefix(160)))"
            }
        }
    }
}

/// What happened to one database of a fleet.
///
/// ```swift
/// switch outcome.result {
/// case .rotated(let report): print("rotated to \(report.currentKeyID)")
/// case .alreadyCurrent, .checked: break
/// case .failed(let failure): print(failure)
/// }
/// ```
public enum FleetResult: Sendable {
    /// It was on an older key (or plaintext, or other settings) and is now on the current key.
    case rotated(OpenReport)
    /// It was already on the current key; nothing was written.
    case alreadyCurrent(OpenReport)
    /// A check-only run: which key opens it (``KeyCheck/needsRotation`` tells whether it is current).
    case checked(KeyCheck)
    /// It failed; the file is unchanged (or, for a failure after a swap, on the current key).
    case failed(FleetFailure)

    /// `true` for ``failed(_:)``.
    public var isFailure: Bool {
        if case .failed = self { return true }
        return false
    }

    /// A stable label: `rotated`, `current` (already current, or checked and current),
    /// `needs-rotation` (checked) or `failed`.
    public var label: String {
        switch self {
        case .rotated: return "rotated"
        case .alreadyCurrent: return "current"
        case .checked(let check): return check.needsRotation ? "needs-rotation" : "current"
        case .failed: return "failed"
        }
    }
}

/// One database's result, with its size and how long it took.
///
/// ```swift
/// let report = FleetRotation(databases: FleetDatabase.all(in: keysFile)).run { _, outcome in
///     print("\(outcome.path): \(outcome.result.label) in \(outcome.duration)")
/// }
/// ```
public struct FleetOutcome: Sendable {
    /// The database path.
    public let path: String
    /// What happened.
    public let result: FleetResult
    /// The file's size before the run (0 when it could not be read).
    public let bytes: Int64
    /// How long this database took.
    public let duration: Duration
}

/// Where a fleet run stands, passed to the progress callback after each database.
///
/// ```swift
/// _ = FleetRotation(databases: databases, jobs: 4).run { progress, _ in
///     print("\(progress.done)/\(progress.total), \(progress.failed) failed")
/// }
/// ```
public struct FleetProgress: Sendable {
    /// Databases finished so far.
    public let done: Int
    /// Databases in the run.
    public let total: Int
    /// Bytes of the finished databases.
    public let bytesDone: Int64
    /// Bytes of all databases.
    public let bytesTotal: Int64
    /// Time since the run started.
    public let elapsed: Duration
    /// Failures so far.
    public let failed: Int

    /// Databases per second so far.
    public var filesPerSecond: Double {
        let seconds = elapsed.milliseconds / 1000
        return seconds > 0 ? Double(done) / seconds : 0
    }

    /// The estimated time left, from the byte rate so far (the file rate when no bytes are known).
    public var estimatedRemaining: Duration? {
        guard done > 0, done < total else { return done >= total ? .zero : nil }
        let seconds = elapsed.milliseconds / 1000
        let fraction = bytesTotal > 0 && bytesDone > 0 ? Double(bytesDone) / Double(bytesTotal) : Double(done) / Double(total)
        guard fraction > 0 else { return nil }
        return .milliseconds(Int64(seconds * (1 - fraction) / fraction * 1000))
    }
}

/// The result of a fleet run: every database's outcome, in the order given.
///
/// ```swift
/// let report = FleetRotation(databases: FleetDatabase.all(in: keysFile), jobs: 4).run()
/// if !report.succeeded { print("\(report.failures.count) databases failed") }
/// ```
public struct FleetReport: Sendable {
    /// The outcomes, in the order the databases were given.
    public let outcomes: [FleetOutcome]
    /// The whole run.
    public let duration: Duration
    /// How many workers ran at once.
    public let jobs: Int

    /// Databases rotated in this run.
    public var rotated: Int { outcomes.filter { if case .rotated = $0.result { return true } else { return false } }.count }
    /// Databases already on the current key (for a check-only run: found current).
    public var alreadyCurrent: Int {
        outcomes.filter {
            switch $0.result {
            case .alreadyCurrent: return true
            case .checked(let check): return !check.needsRotation
            default: return false
            }
        }.count
    }
    /// Check-only runs: databases that need rotation.
    public var needingRotation: Int { outcomes.filter { if case .checked(let check) = $0.result { return check.needsRotation } else { return false } }.count }
    /// The failed databases with their reasons.
    public var failures: [(path: String, failure: FleetFailure)] {
        outcomes.compactMap { if case .failed(let failure) = $0.result { return ($0.path, failure) } else { return nil } }
    }
    /// `true` when no database failed.
    public var succeeded: Bool { failures.isEmpty }
}

/// Rotates (or checks) many databases with a bounded number of worker threads, for a `rekey`
/// run over a fleet or a server that keeps one database per tenant.
///
/// Each database is handled exactly as ``EncryptedDatabase`` opens it (or as
/// ``EncryptedDatabase/check(path:keys:busyTimeout:)`` checks it): find the key, rotate when it is an
/// older one, verify. Databases are independent: one failing does not stop the others. Running
/// again after an interruption costs one key attempt per database already on the current key.
///
/// ```swift
/// let keysFile = try KeysFile.load(path: "Keys")
/// let report = FleetRotation(databases: FleetDatabase.all(in: keysFile), jobs: 4).run { progress, outcome in
///     print("\(progress.done)/\(progress.total) \(outcome.path)")
/// }
/// print(report.rotated, report.alreadyCurrent, report.failures.count)
/// ```
public struct FleetRotation: Sendable {
    /// The databases, in the order their outcomes are reported.
    public let databases: [FleetDatabase]
    /// How many databases are worked on at once (within ``FleetLimits/jobs``).
    public let jobs: Int
    /// How each database is opened (busy timeout, verification, logger; `readOnly` is ignored).
    public let options: OpenOptions
    /// Only find which key opens each file; write nothing.
    public let checkOnly: Bool

    /// A run over `databases` with `jobs` workers (clamped into ``FleetLimits/jobs``).
    public init(databases: [FleetDatabase], jobs: Int = 2, options: OpenOptions = OpenOptions(), checkOnly: Bool = false) {
        self.databases = databases
        self.jobs = min(max(FleetLimits.jobs.lowerBound, jobs), FleetLimits.jobs.upperBound)
        self.options = options
        self.checkOnly = checkOnly
    }

    /// Runs the fleet. `progress` is called once per finished database, one call at a time (from
    /// worker threads), with the run's state and that database's outcome.
    public func run(progress: @escaping @Sendable (FleetProgress, FleetOutcome) -> Void = { _, _ in }) -> FleetReport {
        let run = FleetWorkers(paths: databases.map(\.path), jobs: jobs).run(
            isFailure: { $0.result.isFailure },
            work: { [self] index, bytes in process(databases[index], bytes: bytes) },
            progress: progress)
        return FleetReport(outcomes: run.outcomes, duration: run.duration, jobs: run.workers)
    }

    private func process(_ database: FleetDatabase, bytes: Int64) -> FleetOutcome {
        let stopwatch = Stopwatch()
        let result: FleetResult
        switch database.keys {
        case .failure(let error):
            result = .failed(.keys(error))
        case .success(let keys):
            do {
                if checkOnly {
                    result = .checked(try EncryptedDatabase.check(path: database.path, keys: keys, busyTimeout: options.busyTimeout))
                } else {
                    var open = options
                    open.readOnly = false
                    let report = try EncryptedDatabase(path: database.path, keys: keys, options: open).report
                    result = report.rotated ? .rotated(report) : .alreadyCurrent(report)
                }
            } catch {
                result = .failed(.database(error))
            }
        }
        return FleetOutcome(path: database.path, result: result, bytes: bytes, duration: stopwatch.elapsed)
    }
}

extension FleetFailure: LocalizedError {
    /// The same text as ``description``, so that `localizedDescription` says what happened and what
    /// to do.
    public var errorDescription: String? { description }
}
