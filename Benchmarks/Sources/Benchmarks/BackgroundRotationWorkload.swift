import CSQLCipher
import EncryptedSQLite
import Foundation
import Logging

/// Issue 23's pause benchmark (`--only background-rotation`): what a service sees while its file is
/// rotated to a new key, today's foreground rotation (`rotateToCurrentKey()`, which holds the
/// writer and drains the pool for the whole rewrite) against the background rotation
/// (`rotateInBackground()`: a copy with the online backup API in ~8 ms steps, then one short swap).
///
/// For each size (`--background-mb`) × journal mode (WAL with a pool of 4 readers; DELETE without a
/// pool) × method, in this one run: a file of that size on the key "old" (raw hex keys, random
/// blobs) is copied fresh and opened with `rotateToCurrentKey: false` and a 2-key list whose current
/// key is "new"; 4 tasks each write a ledger row every 2 ms and read a random row, every
/// operation timed; after ~1 s the rotation starts, and the service runs on until ~1 s after it
/// ended. Reported per case: the longest operation and p50/p99 latency of the operations that
/// overlapped the rotation, the rotation's wall time, the peak size of the files beside the database
/// (journal, WAL, temporaries; sampled every 5 ms), failed operations, acknowledged ledger rows
/// missing afterwards, and that the file then opens with the new key and not with the old one.
///
/// The sustained variant (`--background-sustained-mb`): background rotation only, 4 tasks writing
/// 4,000-byte rows as fast as they can, to see whether the copy finishes under that load (capped at
/// `--background-limit` seconds, after which it is cancelled and its progress reported).
struct BackgroundRotationWorkload {
    let folder: String
    let sizesMB: [Int]
    let runs: Int
    let sustainedMB: Int
    let limitSeconds: Int
    let poolReaders: Int
    let oldKey = randomHexKey()
    let newKey = randomHexKey()
    /// The engine's own format: SQLCipher 3's (1 KiB pages) on 3.x, SQLCipher 4's (4 KiB) on 4.x.
    let generation: CipherGeneration = SQLCipherEngine.linked.major >= 4 ? .sqlcipher4 : .sqlcipher3
    var pageSize: Int { generation == .sqlcipher4 ? 4096 : 1024 }
    var rawSettings: String { RotationWorkload.rawSettings(pageSize: pageSize, generation: generation) }

    enum Method: String, CaseIterable, Codable {
        /// `rotateToCurrentKey()` called on a running database (today's rotation).
        case foreground
        /// `rotateInBackground()` called on a running database.
        case background
    }

    enum Mode: String, CaseIterable, Codable {
        case wal = "WAL"
        case delete = "DELETE"
    }

    /// How the service drives the database.
    struct Load {
        /// Pause between one task's operations (nil: as fast as it can).
        let interval: Duration?
        /// Whether each write is followed by a read of a random filler row.
        let reads: Bool
        /// Bytes of each ledger row's blob.
        let bodyBytes: Int

        static let paced = Load(interval: .milliseconds(2), reads: true, bodyBytes: 100)
        static let sustained = Load(interval: nil, reads: false, bodyBytes: 4000)
    }

    static let tasks = 4
    static let lead = Duration.seconds(1)
    static let tail = Duration.seconds(1)

    /// A base file: its path, size and filler rows.
    struct BaseFile {
        let path: String
        let bytes: Int64
        let fillerRows: Int
    }

    /// What one case measured.
    struct Outcome: Codable {
        let method: Method
        let mode: Mode
        let sustained: Bool
        let bytes: Int64
        /// Operations that overlapped the rotation, and their latencies.
        let operationsInRotation: Int
        let longestMS: Double
        let longestKind: String
        /// When the longest operation started, from the rotation's start.
        let longestAtMS: Double
        let p50MS: Double
        let p99MS: Double
        /// The same service in the second before the rotation.
        let p99BeforeMS: Double
        let longestBeforeMS: Double
        let writesPerSecondBefore: Double
        let writesPerSecondDuring: Double
        let operations: Int
        let failed: Int
        let firstFailure: String?
        let acknowledged: Int
        let lost: Int
        /// From the trigger until the call (foreground) or `result()` (background) returned.
        let rotationSeconds: Double
        let finished: Bool
        /// `RotationReport.totalDuration`, `.method`, `.fallbackReason`.
        let reportSeconds: Double?
        let reportMethod: String?
        let fallbackReason: String?
        /// Peak bytes of the files beside the database while the rotation ran, and before it.
        let extraBytes: Int64
        let extraBytesBefore: Int64
        let fileBytesAfter: Int64
        /// Background figures (`RotationReport.background`) and the swap's phases from the log.
        let temporaryBytes: Int64?
        let steps: Int?
        let longestStepMS: Double?
        let swapPauseMS: Double?
        let swapPhases: String?
        /// Progress when the rotation did not finish within the limit.
        let progress: String?
        let newKeyOnly: Bool
    }

    // MARK: Running

    func run(report: Report) throws {
        var paced: [String: [Outcome]] = [:]
        var sustainedBase: BaseFile?
        for megabytes in sizesMB {
            print("  building the \(megabytes) MB file for background rotation (\(generation.name), \(pageSize)-byte pages)…")
            fflush(nil)
            let base = try makeBaseFile(megabytes: megabytes)
            for mode in Mode.allCases {
                var outcomes: [Method: [Outcome]] = [:]
                for run in 0..<runs {
                    let order = run.isMultiple(of: 2) ? Method.allCases : Method.allCases.reversed()
                    for method in order {
                        let outcome = try runCase(base: base, mode: mode, method: method, load: .paced)
                        outcomes[method, default: []].append(outcome)
                        printCase(outcome, run: run)
                    }
                }
                addRows(outcomes, megabytes: megabytes, mode: mode, report: report)
                paced["\(megabytes).\(mode.rawValue)"] = outcomes[.background]
            }
            if megabytes == sustainedMB { sustainedBase = base } else { try? FileManager.default.removeItem(atPath: base.path) }
        }
        if sustainedMB > 0 {
            let base: BaseFile
            if let sustainedBase {
                base = sustainedBase
            } else {
                print("  building the \(sustainedMB) MB file for the sustained-write variant…")
                fflush(nil)
                base = try makeBaseFile(megabytes: sustainedMB)
            }
            for mode in Mode.allCases {
                let outcome = try runCase(base: base, mode: mode, method: .background, load: .sustained)
                printCase(outcome, run: 0)
                addSustainedRows(outcome, megabytes: sustainedMB, quiet: paced["\(sustainedMB).\(mode.rawValue)"] ?? [], report: report)
            }
            try? FileManager.default.removeItem(atPath: base.path)
        }
        summarizeRates(report: report)
    }

    private func basePath(_ megabytes: Int) -> String { folder + "/background-base-\(megabytes).sqlite" }

    /// A file of about `megabytes` MB on the old key, DELETE journal mode: a `filler` table of
    /// 4,000-byte random blobs (one transaction, inserted in chunks until the size is reached) and
    /// an empty `ledger`.
    func makeBaseFile(megabytes: Int) throws -> BaseFile {
        let path = basePath(megabytes)
        for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        let target = Int64(megabytes) * 1_000_000
        let db = try RawConnection(path: path, key: "x'\(oldKey)'", create: true)
        try db.exec(rawSettings)
        try db.exec("""
            PRAGMA journal_mode = DELETE;
            CREATE TABLE filler(id INTEGER PRIMARY KEY, body BLOB);
            CREATE TABLE ledger(id INTEGER PRIMARY KEY, task INTEGER NOT NULL, seq INTEGER NOT NULL, body BLOB);
            BEGIN;
            """)
        let chunk = 2_000
        var rows = 0
        while try db.integer("PRAGMA page_count") * Int64(pageSize) < target {
            try db.exec("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < \(chunk)) INSERT INTO filler(body) SELECT randomblob(4000) FROM n")
            rows += chunk
        }
        try db.exec("COMMIT")
        return BaseFile(path: path, bytes: try fileSize(path), fillerRows: rows)
    }

    /// One case: a fresh copy of `base`, the service, the rotation, the checks.
    func runCase(base: BaseFile, mode: Mode, method: Method, load: Load) throws -> Outcome {
        let caseFolder = folder + "/background-\(mode.rawValue.lowercased())-\(method.rawValue)"
        try? FileManager.default.removeItem(atPath: caseFolder)
        try FileManager.default.createDirectory(atPath: caseFolder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: caseFolder) }
        let path = caseFolder + "/app.sqlite"
        try FileManager.default.copyItem(atPath: base.path, toPath: path)
        sync()

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

    // MARK: Reporting

    private func caseName(_ megabytes: Int, _ mode: Mode) -> String {
        "23 \(mode.rawValue) \(megabytes) MB"
    }

    private func printCase(_ outcome: Outcome, run: Int) {
        var name = (outcome.sustained ? "sustained " : "") + "\(outcome.mode.rawValue) \(outcome.method.rawValue)"
        name += String(repeating: " ", count: max(0, 24 - name.count))
        var line = String(format: "    run %d %@ %6.0f MB  longest %7.1f ms (%@ at %+.0f ms)  p99 %6.1f  p50 %5.2f ms  rotation %6.2f s  extra %6.1f MB  failed %d  lost %d of %d",
                          run + 1, name as NSString, Double(outcome.bytes) / 1e6, outcome.longestMS, outcome.longestKind as NSString, outcome.longestAtMS,
                          outcome.p99MS, outcome.p50MS, outcome.rotationSeconds, Double(outcome.extraBytes) / 1e6, outcome.failed,
                          outcome.lost, outcome.acknowledged)
        line += String(format: "  writes/s %.0f → %.0f", outcome.writesPerSecondBefore, outcome.writesPerSecondDuring)
        if let method = outcome.reportMethod { line += "  method \(method)" }
        if let reason = outcome.fallbackReason { line += "  fallback: \(reason)" }
        if let steps = outcome.steps, let step = outcome.longestStepMS, let swap = outcome.swapPauseMS {
            line += String(format: "  steps %d, longest step %.1f ms, swap %.1f ms", steps, step, swap)
        }
        if let phases = outcome.swapPhases { line += " [\(phases)]" }
        if let progress = outcome.progress { line += "  NOT FINISHED: \(progress)" }
        if let failure = outcome.firstFailure { line += "  first failure: \(failure)" }
        print(line)
        fflush(nil)
    }

    private func addRows(_ outcomes: [Method: [Outcome]], megabytes: Int, mode: Mode, report: Report) {
        let name = caseName(megabytes, mode)
        let fg = outcomes[.foreground] ?? []
        let bg = outcomes[.background] ?? []
        let baseline = "foreground rotateToCurrentKey()"
        let library = "background rotation"
        func row(_ what: String, _ unit: String, _ value: (Outcome) -> Double, target: Target? = nil, notes: [String: String] = [:]) {
            report.add(ResultRow(workload: "\(name) \(what)", baseline: baseline, library: library, unit: unit,
                                 baselineSamples: fg.map(value), librarySamples: bg.map(value), target: target, notes: notes))
        }
        let bytes = Double(bg.first?.bytes ?? fg.first?.bytes ?? 0)
        row("pause", "ms", \.longestMS, target: .valueAtMost(100),
            notes: ["target": "background longest operation ≤ 100 ms (issue 23)",
                    "longestBackground": bg.map { String(format: "%.1f ms %@ at %+.0f ms", $0.longestMS, $0.longestKind, $0.longestAtMS) }.joined(separator: "; "),
                    "swapPhases": bg.compactMap(\.swapPhases).joined(separator: "; ")])
        row("p99", "ms", \.p99MS, notes: ["p99BeforeRotation": String(format: "foreground %.2f ms, background %.2f ms", median(fg.map(\.p99BeforeMS)), median(bg.map(\.p99BeforeMS)))])
        row("p50", "ms", \.p50MS)
        row("time", "ms", { $0.rotationSeconds * 1000 },
            notes: ["foregroundMethod": fg.first?.reportMethod ?? "?", "backgroundMethod": bg.first?.reportMethod ?? "?"])
        row("extra disk", "MB", { Double($0.extraBytes) / 1e6 },
            notes: ["measured": "peak total size of the files beside the database while the rotation ran, sampled every 5 ms",
                    "temporaryBytes": bg.compactMap(\.temporaryBytes).map(String.init).joined(separator: ",")])
        row("failed", "n", { Double($0.failed) }, target: .valueAtMost(0))
        row("lost", "n", { Double($0.lost) }, target: .valueAtMost(0),
            notes: ["acknowledged": "foreground \(fg.map(\.acknowledged)), background \(bg.map(\.acknowledged))"])
        row("s/GB", "s/GB", { $0.rotationSeconds / (bytes / 1e9) })
        for (method, list) in [(Method.foreground, fg), (.background, bg)] {
            report.note("background-rotation.\(megabytes).\(mode.rawValue).\(method.rawValue)", summary(list))
        }
        let missing = (fg + bg).filter { !$0.newKeyOnly }
        if !missing.isEmpty { print("    WARNING: \(missing.count) case(s) did not end on the new key only") }
    }

    private func addSustainedRows(_ outcome: Outcome, megabytes: Int, quiet: [Outcome], report: Report) {
        let name = "23 busy \(outcome.mode.rawValue) \(megabytes) MB"
        let notes = ["finished": outcome.finished ? "yes" : "no", "progress": outcome.progress ?? "",
                     "fileMBAfter": String(format: "%.1f", Double(outcome.fileBytesAfter) / 1e6),
                     "load": "\(Self.tasks) tasks, each writing 4,000-byte ledger rows as fast as it can, no reads"]
        report.add(ResultRow(workload: "\(name) writes/s", baseline: "service before the rotation", library: "during background rotation",
                             unit: "ops/s", baselineSamples: [outcome.writesPerSecondBefore], librarySamples: [outcome.writesPerSecondDuring], notes: notes))
        report.add(ResultRow(workload: "\(name) pause", baseline: "service before the rotation", library: "during background rotation",
                             unit: "ms", baselineSamples: [outcome.longestBeforeMS], librarySamples: [outcome.longestMS], notes: notes))
        report.add(ResultRow(workload: "\(name) time", baseline: "background, 2 ms service", library: outcome.finished ? "background, sustained writes" : "background, NOT FINISHED",
                             unit: "ms", baselineSamples: quiet.map { $0.rotationSeconds * 1000 }, librarySamples: [outcome.rotationSeconds * 1000], notes: notes))
        report.add(ResultRow(workload: "\(name) fail/lost", baseline: "failed operations", library: "lost writes",
                             unit: "n", baselineSamples: [Double(outcome.failed)], librarySamples: [Double(outcome.lost)], target: .valueAtMost(0)))
        report.note("background-rotation.sustained.\(megabytes).\(outcome.mode.rawValue)", summary([outcome]))
    }

    /// The 10 GB figures from the largest size's measured rates.
    private func summarizeRates(report: Report) {
        guard let largest = sizesMB.max() else { return }
        for mode in Mode.allCases {
            guard let section = report.sections["background-rotation.\(largest).\(mode.rawValue).foreground"],
                  let backgroundSection = report.sections["background-rotation.\(largest).\(mode.rawValue).background"],
                  let fg = section["medianSecondsPerGB"].flatMap(Double.init), let bg = backgroundSection["medianSecondsPerGB"].flatMap(Double.init) else { continue }
            let line = String(format: "10 GB from the %d MB rates (%@): foreground %.0f s holding the writer, background %.0f s of copying", largest, mode.rawValue, fg * 10, bg * 10)
            print("  " + line)
            report.note("background-rotation.tenGB.\(mode.rawValue)", ["foregroundSeconds": String(format: "%.1f", fg * 10), "backgroundSeconds": String(format: "%.1f", bg * 10),
                                                                        "from": "\(largest) MB, medians", "measured": "no (extrapolated from the per-GB rate)"])
        }
    }

    private func summary(_ list: [Outcome]) -> [String: String] {
        func med(_ value: (Outcome) -> Double, _ format: String = "%.2f") -> String { String(format: format, median(list.map(value))) }
        var values: [String: String] = [
            "bytes": "\(list.first?.bytes ?? 0)",
            "runs": "\(list.count)",
            "medianLongestMS": med(\.longestMS), "medianP99MS": med(\.p99MS), "medianP50MS": med(\.p50MS),
            "medianRotationSeconds": med(\.rotationSeconds, "%.3f"),
            "medianSecondsPerGB": med({ $0.rotationSeconds / (Double($0.bytes) / 1e9) }, "%.3f"),
            "medianExtraMB": med({ Double($0.extraBytes) / 1e6 }, "%.1f"),
            "failed": list.map { "\($0.failed)" }.joined(separator: ","),
            "lost": list.map { "\($0.lost)" }.joined(separator: ","),
            "acknowledged": list.map { "\($0.acknowledged)" }.joined(separator: ","),
            "newKeyOnly": list.allSatisfy(\.newKeyOnly) ? "yes" : "no",
            "finished": list.allSatisfy(\.finished) ? "yes" : "no",
        ]
        if let encoded = try? JSONEncoder().encode(list), let text = String(data: encoded, encoding: .utf8) { values["cases"] = text }
        return values
    }
}

private func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    let index = min(sorted.count - 1, max(0, Int((fraction * Double(sorted.count)).rounded(.up)) - 1))
    return sorted[index]
}

/// Runs a blocking call on a thread of its own (not one of the cooperative pool's two threads).
private func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.start()
    }
}

/// A flag set once, read by every task.
final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}

/// Every operation of the service: when it started, how long it took, whether it failed; and the
/// ledger rows whose writes returned.
final class ServiceLog: @unchecked Sendable {
    struct Operation {
        let start: Double
        let seconds: Double
        let isWrite: Bool
        let failed: Bool
    }

    private let lock = NSLock()
    // Invariant: only touched with `lock` held.
    private var recorded: [Operation] = []
    private var acked = Set<Int64>()
    private var firstFailure: String?

    static func key(task: Int, seq: Int) -> Int64 { Int64(task) << 32 | Int64(seq) }

    func record(start: Duration, seconds: Double, isWrite: Bool, acknowledged: (task: Int, seq: Int)? = nil, error: (any Error)? = nil) {
        lock.withLock {
            recorded.append(Operation(start: start.seconds, seconds: seconds, isWrite: isWrite, failed: error != nil))
            if let acknowledged { acked.insert(Self.key(task: acknowledged.task, seq: acknowledged.seq)) }
            if let error, firstFailure == nil { firstFailure = "\(error)" }
        }
    }

    var operations: [Operation] { lock.withLock { recorded } }
    var acknowledged: Set<Int64> { lock.withLock { acked } }
    var firstError: String? { lock.withLock { firstFailure } }
}

/// Samples, every 5 ms on a thread of its own, the total size of the files beside the database in
/// its folder (journal, WAL, shared memory, rotation temporaries). Only `stat`s them: it opens none.
final class DiskSampler: @unchecked Sendable {
    private let folder: String
    private let database: String
    private let lock = NSLock()
    // Invariant: only touched with `lock` held.
    private var samples: [(at: Double, bytes: Int64)] = []
    private var stopped = false
    private let done = DispatchSemaphore(value: 0)

    init(folder: String, database: String) {
        self.folder = folder
        self.database = database
    }

    func start(origin: ContinuousClock.Instant) {
        let thread = Thread { [self] in
            while !lock.withLock({ stopped }) {
                var total: Int64 = 0
                for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] where name != database {
                    var status = stat()
                    if stat(folder + "/" + name, &status) == 0 { total += Int64(status.st_size) }
                }
                let at = (ContinuousClock.now - origin).seconds
                lock.withLock { samples.append((at, total)) }
                usleep(5000)
            }
            done.signal()
        }
        thread.start()
    }

    func stop() {
        lock.withLock { stopped = true }
        done.wait()
    }

    /// The largest total sampled between `from` and `to` (seconds since the origin).
    func peak(from: Double, to: Double) -> Int64 {
        lock.withLock { samples.filter { $0.at >= from && $0.at <= to }.map(\.bytes).max() ?? 0 }
    }
}

/// The log entries of one case, for the swap's phases (`swap_phases_ms`).
final class LogSink: @unchecked Sendable {
    struct Entry {
        let message: String
        let metadata: [String: String]
    }

    private let lock = NSLock()
    // Invariant: only touched with `lock` held.
    private var captured: [Entry] = []

    func add(_ entry: Entry) { lock.withLock { captured.append(entry) } }
    var entries: [Entry] { lock.withLock { captured } }
}

struct CapturingHandler: LogHandler {
    let sink: LogSink
    var logLevel: Logger.Level = .notice
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        sink.add(.init(message: "\(event.message)", metadata: all.mapValues { "\($0)" }))
    }
}
