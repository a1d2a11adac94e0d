import CSQLCipher
import EncryptedSQLite
import Foundation
import Logging

/// One case of ``BackgroundRotationWorkload``: a fresh copy of the base file, the service of
/// ``BackgroundRotationWorkload/tasks`` tasks, the rotation, and the checks afterwards.
extension BackgroundRotationWorkload {
    /// One case: a fresh copy of `base`, the service, the rotation, the checks.
    func runCase(base: BaseFile, mode: Mode, method: Method, load: Load) throws -> Outcome {
        let caseFolder = folder + "/background-\(mode.rawValue.lowercased())-\(method.rawValue)"
        try? FileManager.default.removeItem(atPath: caseFolder)
        try FileManager.default.createDirectory(atPath: caseFolder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: caseFolder) }
        let path = caseFolder + "/app.sqlite"
        try FileManager.default.copyItem(atPath: base.path, toPath: path)
        // Unflushed (`--background-unflushed`): the rotation starts while the copy's 256 MB or
        // more are still being written out, as right after a user made or copied the file.
        if !unflushed { sync() }

        let log = LogSink()
        var logger = Logger(label: "EncryptedSQLite.bench") { _ in CapturingHandler(sink: log) }
        logger.logLevel = .notice
        let cipher = CipherSettings(generation: generation, pageSize: pageSize)
        let keys = try KeyList(database: path, keys: [DatabaseKey(id: "old", source: .hex(oldKey), cipher: cipher),
                                                      DatabaseKey(id: "new", source: .hex(newKey), cipher: cipher)],
                               environment: [:])
        let options = OpenOptions(rotateToCurrentKey: false, concurrentReaders: mode == .wal ? poolReaders : 0, logger: logger)
        let service = ServiceLog()
        let disk = DiskSampler(folder: caseFolder, database: "app.sqlite")
        let timeline = try serve(path: path, keys: keys, options: options, method: method, load: load, fillerRows: base.fillerRows,
                                 service: service, disk: disk)
        disk.stop()

        // Afterwards (the database is released): the file opens with the new key only, and every
        // acknowledged ledger row is in it.
        let opened = try RawConnection(path: path, key: "x'\(newKey)'", readOnly: true)
        try opened.exec(rawSettings)
        let opensWithNew = (try? opened.verifyReadable()) != nil
        let stale = try RawConnection(path: path, key: "x'\(oldKey)'", readOnly: true)
        try stale.exec(rawSettings)
        let opensWithOld = (try? stale.verifyReadable()) != nil
        let expectNew = timeline.finished
        guard expectNew ? (opensWithNew && !opensWithOld) : (opensWithOld && !opensWithNew) else {
            throw BenchmarkError("background-rotation \(method.rawValue) \(mode.rawValue): after the run the file opens with the new key: \(opensWithNew), with the old key: \(opensWithOld) (rotation finished: \(timeline.finished))")
        }
        let present = try ledgerRows(expectNew ? opened : stale)
        let acknowledged = service.acknowledged
        let lost = acknowledged.subtracting(present).count

        let window = (start: timeline.rotationStart, end: timeline.rotationEnd)
        let operations = service.operations
        let during = operations.filter { $0.start < window.end && $0.start + $0.seconds > window.start }
        let before = operations.filter { $0.start >= window.start - Self.lead.seconds && $0.start + $0.seconds <= window.start }
        let longest = during.max { $0.seconds < $1.seconds }
        let latencies = during.map(\.seconds).sorted()
        let writesDuring = operations.filter { $0.isWrite && $0.start >= window.start && $0.start < window.end }.count
        let writesBefore = before.filter(\.isWrite).count
        let background = timeline.report?.background
        let swap = log.entries.last { $0.message == "rotated database key in the background" }
        let failures = operations.filter(\.failed)
        return Outcome(
            method: method, mode: mode, sustained: load.interval == nil, bytes: base.bytes,
            operationsInRotation: during.count,
            longestMS: (longest?.seconds ?? .nan) * 1000, longestKind: longest.map { $0.isWrite ? "write" : "read" } ?? "-",
            longestAtMS: ((longest?.start ?? .nan) - window.start) * 1000,
            p50MS: percentile(latencies, 0.50) * 1000, p99MS: percentile(latencies, 0.99) * 1000,
            p99BeforeMS: percentile(before.map(\.seconds).sorted(), 0.99) * 1000,
            longestBeforeMS: (before.map(\.seconds).max() ?? .nan) * 1000,
            writesPerSecondBefore: Double(writesBefore) / Self.lead.seconds,
            writesPerSecondDuring: Double(writesDuring) / max(window.end - window.start, 1e-9),
            operations: operations.count, failed: failures.count, firstFailure: service.firstError,
            acknowledged: acknowledged.count, lost: lost,
            rotationSeconds: window.end - window.start, finished: timeline.finished,
            reportSeconds: timeline.report?.totalDuration.seconds, reportMethod: timeline.report?.method.rawValue,
            fallbackReason: timeline.report?.fallbackReason,
            extraBytes: disk.peak(from: window.start, to: window.end), extraBytesBefore: disk.peak(from: 0, to: window.start),
            fileBytesAfter: try fileSize(path),
            temporaryBytes: background?.temporaryBytes, steps: background?.steps,
            longestStepMS: background.map { $0.longestStep.seconds * 1000 }, swapPauseMS: background.map { $0.swapPause.seconds * 1000 },
            swapPhases: swap?.metadata["swap_phases_ms"], progress: timeline.progress, newKeyOnly: opensWithNew && !opensWithOld)
    }

    /// What the rotation did, on the service's clock (seconds since the service started).
    struct Timeline: Sendable {
        var rotationStart = 0.0
        var rotationEnd = 0.0
        var report: RotationReport?
        var finished = false
        var progress: String?
    }

    /// Opens the database, runs the service, starts the rotation after ``lead``, stops the service
    /// ``tail`` after the rotation ended, and releases the database.
    private func serve(path: String, keys: KeyList, options: OpenOptions, method: Method, load: Load, fillerRows: Int,
                       service: ServiceLog, disk: DiskSampler) throws -> Timeline {
        let database = try EncryptedDatabase(path: path, keys: keys, options: options)
        guard database.report.openedWithKeyID == "old", !database.report.rotated else {
            throw BenchmarkError("background-rotation: the open did not leave the file on the old key")
        }
        let origin = ContinuousClock.now
        disk.start(origin: origin)
        let stop = Flag()
        let limit = Duration.seconds(limitSeconds)
        return try waitFor {
            try await withThrowingTaskGroup(of: Timeline?.self) { group in
                for task in 0..<Self.tasks {
                    group.addTask {
                        await Self.serviceTask(task, database: database, load: load, fillerRows: fillerRows, origin: origin, stop: stop, log: service)
                        return nil
                    }
                }
                group.addTask {
                    defer { stop.set() }
                    try await Task.sleep(for: Self.lead)
                    var timeline = Timeline()
                    timeline.rotationStart = (ContinuousClock.now - origin).seconds
                    switch method {
                    case .foreground:
                        timeline.report = try await onThread { try database.rotateToCurrentKey() }
                        timeline.finished = timeline.report != nil
                    case .background:
                        guard let rotation = try await onThread({ try database.rotateInBackground() }) else {
                            throw BenchmarkError("rotateInBackground() started no rotation")
                        }
                        let outcome = await Self.follow(rotation, limit: limit)
                        timeline.report = outcome.report
                        timeline.finished = outcome.report != nil
                        timeline.progress = outcome.progress
                    }
                    timeline.rotationEnd = (ContinuousClock.now - origin).seconds
                    try await Task.sleep(for: Self.tail)
                    return timeline
                }
                var timeline: Timeline?
                for try await result in group where result != nil { timeline = result }
                guard let timeline else { throw BenchmarkError("the rotation task returned nothing") }
                return timeline
            }
        }
    }

    /// Waits for a background rotation, cancelling it after `limit`. Returns its report, or where
    /// it was when it was cancelled (or how it ended otherwise).
    private static func follow(_ rotation: BackgroundRotation, limit: Duration) async -> (report: RotationReport?, progress: String?) {
        let start = ContinuousClock.now
        let watcher = Task {
            var last: BackgroundRotationProgress?
            while !rotation.state.isFinal {
                if case .copying(let progress) = rotation.state { last = progress }
                if ContinuousClock.now - start > limit {
                    rotation.cancel()
                    return last.map { "cancelled after \(Int(limit.seconds)) s: \($0.copiedPages) of \($0.totalPages) pages copied" }
                }
                try? await Task.sleep(for: .milliseconds(50))
            }
            return nil
        }
        do {
            let report = try await rotation.result()
            watcher.cancel()
            return (report, nil)
        } catch {
            let progress = await watcher.value
            return (nil, progress ?? "ended without a report: \(error)")
        }
    }

    /// One task of the service: a ledger write (then a read of a random filler row), every
    /// `load.interval` or as fast as it can, each timed; until `stop`.
    private static func serviceTask(_ task: Int, database: EncryptedDatabase, load: Load, fillerRows: Int, origin: ContinuousClock.Instant,
                                    stop: Flag, log: ServiceLog) async {
        var seq = 0
        var random = SplitMix64(seed: UInt64(task + 1) &* 0x9E37_79B9_7F4A_7C15)
        var next = ContinuousClock.now
        let body = load.bodyBytes
        while !stop.isSet {
            let row = seq
            let writeStart = ContinuousClock.now
            do {
                try await database.write { db in
                    try db.cachedStatement("INSERT INTO ledger(task, seq, body) VALUES (?, ?, randomblob(?))").execute(values: task, row, body)
                }
                log.record(start: writeStart - origin, seconds: (ContinuousClock.now - writeStart).seconds, isWrite: true, acknowledged: (task, row))
            } catch {
                log.record(start: writeStart - origin, seconds: (ContinuousClock.now - writeStart).seconds, isWrite: true, error: error)
            }
            seq += 1
            if load.reads {
                let id = Int(random.next() % UInt64(max(fillerRows, 1))) + 1
                let readStart = ContinuousClock.now
                do {
                    _ = try await database.read { db in
                        try db.cachedStatement("SELECT length(body) FROM filler WHERE id = ?").fetchOne(values: id) { try $0.get(0, as: Int.self) }
                    }
                    log.record(start: readStart - origin, seconds: (ContinuousClock.now - readStart).seconds, isWrite: false)
                } catch {
                    log.record(start: readStart - origin, seconds: (ContinuousClock.now - readStart).seconds, isWrite: false, error: error)
                }
            }
            if let interval = load.interval {
                // Every `interval`, without catching up on the ones missed while waiting.
                next += interval
                let now = ContinuousClock.now
                if next > now { try? await Task.sleep(until: next, clock: .continuous) } else { next = now }
            }
        }
    }

    /// `(task, seq)` of every ledger row in the file, as ``ServiceLog`` keys them.
    private func ledgerRows(_ db: RawConnection) throws -> Set<Int64> {
        let statement = try db.prepare("SELECT task, seq FROM ledger")
        defer { sqlite3_finalize(statement) }
        var rows = Set<Int64>()
        var code = sqlite3_step(statement)
        while code == SQLITE_ROW {
            rows.insert(ServiceLog.key(task: Int(sqlite3_column_int64(statement, 0)), seq: Int(sqlite3_column_int64(statement, 1))))
            code = sqlite3_step(statement)
        }
        guard code == SQLITE_DONE else { throw db.error(code, "SELECT task, seq FROM ledger") }
        return rows
    }
}
