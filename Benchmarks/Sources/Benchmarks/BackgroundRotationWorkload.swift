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
    /// Whether each case's fresh copy of the base file is left to the page cache (no `sync`).
    var unflushed = false
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
}
