import Dispatch
import EncryptedSQLite
import Foundation
import Logging

/// `/health`: the library's ``DatabaseHealth`` for the service's database — the key it is on and
/// whether it needs rotation, the current key's age against its policy, journal mode, file and
/// `-wal` sizes, and every page's HMAC — computed at most once per `interval`.
///
/// The check reads every page of the file on its own read-only connection (seconds for a large
/// file), so it runs off the cooperative pool, concurrent requests share one run, and the answer
/// is cached; `?fresh=1` asks for a new run. The answer leaves out the file's path, and a failed
/// check's error, which may name it, goes to the log only.
actor HealthMonitor {
    /// The JSON `/health` sends: the check and how old it is.
    struct Answer: Codable, Sendable {
        var status: String
        var checkedSecondsAgo: Double
        var health: Report?
        var error: String?
    }

    /// The library's ``DatabaseHealth`` without its `path`: where the file is, is the operator's to
    /// know, not a client's.
    struct Report: Codable, Sendable {
        var keyID, currentKeyID: String
        var needsRotation, keyTooOld: Bool
        var format, journalMode, integrityMethod: String
        var bytes, walBytes: Int64
        var integrity: DatabaseHealth.Integrity
        var integrityDetail, currentKeyCreated: String?
        var currentKeyAgeDays, maximumKeyAgeDays: Int?

        init(_ health: DatabaseHealth) {
            (keyID, currentKeyID, needsRotation, keyTooOld) = (health.keyID, health.currentKeyID, health.needsRotation, health.keyTooOld)
            (format, journalMode, integrityMethod) = (health.format, health.journalMode, health.integrityMethod)
            (bytes, walBytes, integrity, integrityDetail) = (health.bytes, health.walBytes, health.integrity, health.integrityDetail)
            (currentKeyCreated, currentKeyAgeDays, maximumKeyAgeDays) = (health.currentKeyCreated, health.currentKeyAgeDays, health.maximumKeyAgeDays)
        }
    }

    private let interval: Duration
    private var last: (at: ContinuousClock.Instant, result: Result<DatabaseHealth, any Error>)?
    private var running: Task<Result<DatabaseHealth, any Error>, Never>?

    init(interval: Duration) {
        self.interval = interval
    }

    /// The health of `database`'s file, from the cache when it is younger than `interval`; a failed
    /// check is logged to `logger`.
    func answer(for database: EncryptedDatabase, fresh: Bool, logger: Logger) async -> Answer {
        let now = ContinuousClock.now
        let result: Result<DatabaseHealth, any Error>
        let at: ContinuousClock.Instant
        if !fresh, let last, now - last.at < interval {
            (at, result) = last
        } else {
            let task = running ?? Task {
                let (path, keys) = (database.path, database.keys)
                return await withCheckedContinuation { continuation in
                    DispatchQueue.global().async {
                        continuation.resume(returning: Result { () throws(EncryptedDatabaseError) in try DatabaseHealth.check(path: path, keys: keys) }.mapError { $0 as any Error })
                    }
                }
            }
            running = task
            result = await task.value
            at = ContinuousClock.now
            last = (at, result)
            running = nil
        }
        let age = (ContinuousClock.now - at) / .milliseconds(1) / 1000
        switch result {
        case .success(let health):
            let healthy = health.integrity != .failed && !health.keyTooOld
            return Answer(status: healthy ? (health.needsRotation ? "needs rotation" : "ok") : "unhealthy", checkedSecondsAgo: age, health: Report(health), error: nil)
        case .failure(let error):
            logger.error("health check failed", metadata: ["error": "\(error)"])
            return Answer(status: "unhealthy", checkedSecondsAgo: age, health: nil, error: "the check failed: see the server's log")
        }
    }
}
