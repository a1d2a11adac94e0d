import Foundation
import SQLCipherConnection

extension EncryptedDatabase {
    /// Checks that the database answers a read now, cheaply enough for a health or readiness
    /// endpoint: one read of the schema page on a pooled reader (or the writer, without a pool),
    /// waiting at most `limit` for a connection. Never throws: every outcome is in the result.
    ///
    /// ```swift
    /// router.get("/health") { _ in
    ///     let probe = await database.probe(waitingAtMost: .milliseconds(500))
    ///     return Response(status: probe.isHealthy ? .ok : .serviceUnavailable, body: try JSONEncoder().encode(probe))
    /// }
    /// ```
    ///
    /// A rotation in the foreground holds the database: the probe then says ``DatabaseProbe/Status/busy``
    /// after `limit` instead of waiting for it. A background rotation does not: reads go on.
    public func probe(waitingAtMost limit: Duration = .seconds(1)) async -> DatabaseProbe {
        let clock = ContinuousClock()
        let start = clock.now
        let status: DatabaseProbe.Status
        var detail: String?
        do {
            try checkOpen()
            _ = try await probeRead(limit: limit)
            status = .ok
        } catch EncryptedDatabaseError.closed {
            status = .closed
            detail = EncryptedDatabaseError.closed(path: path).description
        } catch let error as EncryptedDatabaseError {
            if case .writerWaitExpired = error {
                status = .busy
                detail = "no connection was free within \(Int((limit / .milliseconds(1)).rounded())) ms: a rotation, a migration or long writes hold the database"
            } else {
                status = .failed
                detail = error.description
            }
        } catch {
            status = .failed
            detail = "\(error)"
        }
        let rotation = backgroundRotation
        return DatabaseProbe(
            path: path, status: status, detail: detail, keyID: writer.keyID, currentKeyID: keys.currentID,
            rotatingInBackground: rotation.map { !$0.state.isFinal } ?? false,
            milliseconds: (clock.now - start) / .milliseconds(1))
    }

    /// The probe's read: on a free pooled reader at once, else waiting at most `limit`.
    private func probeRead(limit: Duration) async throws -> Int {
        let count: @Sendable (Connection) throws -> Int = { db in try db.queryValue("SELECT count(*) FROM sqlite_master", as: Int.self) ?? 0 }
        if let readers, case .read(let value) = try readOnFreeReader(readers, count) { return value }
        return try await runWaiting(on: readers == nil ? .writer(writer.executor) : .blocking(queue), limit: limit) { waiting in
            try self.performRead { db in
                try waiting.mustStart()
                return try count(db)
            }
        }
    }
}
