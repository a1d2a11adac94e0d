import CSQLCipher
import EncryptedSQLite
import Foundation

/// Workload 6: rotating a large database. The file is built once; for every run of every method it
/// is copied fresh (and flushed, so that no method pays for writing back the copy), the page cache
/// stays warm, and the method runs in a child process (this binary, re-executed with the hidden
/// subcommand `__rotation-child`) so that its peak RSS is its own.
///
/// Methods: the product (an `EncryptedDatabase` opened with a 2-key list whose current key is new:
/// it rotates, verifies and fsyncs), raw `sqlite3_rekey`, raw `ATTACH … KEY` + `sqlcipher_export`
/// into a new file, and the raw backup API between two keyed handles. Keys are raw keys
/// (`x'<64 hex>'`) passed to the child in its environment, never on its command line.
struct RotationWorkload {
    let folder: String
    let megabytes: Int
    let runs: Int
    /// The page size.
    let pageSize: Int
    /// The file's format: SQLCipher 3's (on either engine) or SQLCipher 4's (on SQLCipher 4).
    let generation: CipherGeneration
    let oldKey = randomHexKey()
    let newKey = randomHexKey()

    static let methods = ["product", "rekey", "export", "backup"]
    static let oldKeyVariable = "ENCRYPTEDSQLITE_BENCH_OLD_KEY"
    static let newKeyVariable = "ENCRYPTEDSQLITE_BENCH_NEW_KEY"
    static let pageSizeVariable = "ENCRYPTEDSQLITE_BENCH_PAGE_SIZE"
    static let generationVariable = "ENCRYPTEDSQLITE_BENCH_GENERATION"

    /// What every raw connection on the rotation file runs after the key: `generation`'s format
    /// (`cipher_compatibility` on SQLCipher 4; 3.4.1 writes only the 3.x format) at `pageSize`.
    static func rawSettings(pageSize: Int, generation: CipherGeneration) -> String {
        (SQLCipherEngine.linked.major >= 4 ? "PRAGMA cipher_compatibility = \(generation.rawValue); " : "") + "PRAGMA cipher_page_size = \(pageSize);"
    }

    var rawSettings: String { Self.rawSettings(pageSize: pageSize, generation: generation) }

    var basePath: String { folder + "/rotation-base.sqlite" }

    /// What one child reports.
    struct Outcome: Codable {
        let method: String
        let bytes: Int64
        /// Wall time of the method in the child (open to close).
        let seconds: Double
        /// For the product: `RotationReport.totalDuration` (rekey or re-encryption, verification, fsync).
        let rotationSeconds: Double?
        let rotationMethod: String?
        let verifySeconds: Double?
        let peakRSSKB: Int
        let startRSSKB: Int
    }

    /// Builds the base file: a table of ~1 KB blobs with an index on a text column, `pageSize`
    /// pages, DELETE journal mode, keyed with the old raw key.
    func makeBaseFile() throws -> Int64 {
        try? FileManager.default.removeItem(atPath: basePath)
        let rows = megabytes * 1_000_000 / 1165  // ~1165 bytes per row with 1 KiB pages and the index
        let db = try RawConnection(path: basePath, key: "x'\(oldKey)'", create: true)
        try db.exec(rawSettings)
        try db.exec("""
            CREATE TABLE big(id INTEGER PRIMARY KEY, tag TEXT, payload BLOB);
            CREATE INDEX big_tag ON big(tag);
            BEGIN;
            WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < \(rows))
            INSERT INTO big(tag, payload) SELECT 'tag' || (x % 97), randomblob(1000) FROM n;
            COMMIT;
            PRAGMA user_version = 7;
            """)
        return try fileSize(basePath)
    }

    func run(options: Options, report: Report) throws {
        print("  building the \(megabytes) MB rotation file (\(generation.name) format, \(pageSize)-byte pages)…")
        fflush(nil)
        let bytes = try makeBaseFile()
        var outcomes: [String: [Outcome]] = [:]
        for run in 0..<runs {
            // Rotate the order of methods between runs, so that none always runs first.
            let order = Self.methods.indices.map { Self.methods[($0 + run) % Self.methods.count] }
            for method in order {
                let outcome = try runChild(method: method)
                outcomes[method, default: []].append(outcome)
                let name = method + String(repeating: " ", count: max(0, 8 - method.count))
                print("    run \(run + 1) \(name)" + String(format: "%7.2f s  %6.1f MB/s  peak RSS %5.1f MB (%4.1f MB at start)", outcome.seconds,
                                                              Double(bytes) / 1e6 / outcome.seconds, Double(outcome.peakRSSKB) / 1024,
                                                              Double(outcome.startRSSKB) / 1024)
                      + (outcome.rotationMethod.map { "  RotationReport.method: \($0)" } ?? ""))
                fflush(nil)
            }
        }
        func throughput(_ method: String) -> [Double] {
            outcomes[method, default: []].map { Double(bytes) / 1e6 / ($0.rotationSeconds ?? $0.seconds) }
        }
        func wallThroughput(_ method: String) -> [Double] { outcomes[method, default: []].map { Double(bytes) / 1e6 / $0.seconds } }
        func rss(_ method: String) -> [Double] { outcomes[method, default: []].map { Double($0.peakRSSKB) / 1024 } }
        let productMethod = outcomes["product"]?.first?.rotationMethod ?? "?"
        let size = String(format: "%.0f MB, %@, %d-byte pages", Double(bytes) / 1e6, generation.name, pageSize)
        report.add(ResultRow(workload: "6 rotate \(size)", baseline: "raw sqlite3_rekey", library: "rotation (\(productMethod)), report time",
                             unit: "MB/s", baselineSamples: throughput("rekey"), librarySamples: throughput("product"),
                             target: .ratioAtLeast(4),
                             notes: ["rotationMethod": productMethod, "target": "product throughput ≥ 4× raw rekey (issue 12)"]))
        report.add(ResultRow(workload: "6 rotate \(size), wall", baseline: "raw sqlite3_rekey", library: "EncryptedDatabase open, wall",
                             unit: "MB/s", baselineSamples: wallThroughput("rekey"), librarySamples: wallThroughput("product")))
        for method in ["export", "backup"] {
            report.add(ResultRow(workload: "6 rotate \(size)", baseline: "raw sqlite3_rekey", library: "(raw \(method == "export" ? "sqlcipher_export" : "backup API"))",
                                 unit: "MB/s", baselineSamples: throughput("rekey"), librarySamples: throughput(method)))
        }
        report.add(ResultRow(workload: "6 rotate \(size), peak RSS", baseline: "raw sqlite3_rekey", library: "rotation (\(productMethod))",
                             unit: "MB", baselineSamples: rss("rekey"), librarySamples: rss("product"), target: .valueAtMost(40)))
        for method in Self.methods {
            let list = outcomes[method, default: []]
            report.note("rotation.\(generation.name).\(pageSize).\(method)", [
                "bytes": "\(bytes)",
                "medianSeconds": String(format: "%.3f", median(list.map { $0.rotationSeconds ?? $0.seconds })),
                "medianWallSeconds": String(format: "%.3f", median(list.map(\.seconds))),
                "medianMBps": String(format: "%.1f", median(throughput(method))),
                "medianPeakRSSMB": String(format: "%.1f", median(rss(method))),
                "medianStartRSSMB": String(format: "%.1f", median(list.map { Double($0.startRSSKB) / 1024 })),
                "rotationMethod": list.first?.rotationMethod ?? "",
            ])
        }
    }

    /// Copies the base file fresh, flushes it to disk, runs `method` in a child process and checks
    /// that the result opens with the new key (and not with the old one).
    func runChild(method: String) throws -> Outcome {
        let path = folder + "/rotation-\(method).sqlite"
        let target = folder + "/rotation-\(method)-new.sqlite"
        for file in [path, target, path + "-journal", target + "-journal", path + "-wal", path + "-shm"] {
            try? FileManager.default.removeItem(atPath: file)
        }
        try FileManager.default.copyItem(atPath: basePath, toPath: path)
        sync()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try selfExecutable())
        process.arguments = ["__rotation-child", method, path, target]
        var environment = ProcessInfo.processInfo.environment
        environment[Self.oldKeyVariable] = oldKey
        environment[Self.newKeyVariable] = newKey
        environment[Self.pageSizeVariable] = "\(pageSize)"
        environment[Self.generationVariable] = "\(generation.rawValue)"
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchmarkError("rotation child \(method) exited with \(process.terminationStatus)") }
        let outcome = try JSONDecoder().decode(Outcome.self, from: data)
        let result = method == "export" || method == "backup" ? target : path
        let opened = try RawConnection(path: result, key: "x'\(newKey)'", readOnly: true)
        try opened.exec(rawSettings)
        guard (try? opened.verifyReadable()) != nil else { throw BenchmarkError("\(method): the result does not open with the new key") }
        let stale = try RawConnection(path: result, key: "x'\(oldKey)'", readOnly: true)
        try stale.exec(rawSettings)
        guard (try? stale.verifyReadable()) == nil else { throw BenchmarkError("\(method): the result still opens with the old key") }
        for file in [path, target] { try? FileManager.default.removeItem(atPath: file) }
        return outcome
    }

    /// The hidden subcommand: runs one method on `path` and prints its ``Outcome`` as JSON.
    static func child(arguments: [String]) throws {
        guard arguments.count == 3, let oldKey = ProcessInfo.processInfo.environment[oldKeyVariable],
              let newKey = ProcessInfo.processInfo.environment[newKeyVariable],
              let pageSize = ProcessInfo.processInfo.environment[pageSizeVariable].flatMap({ Int($0) }),
              let generation = ProcessInfo.processInfo.environment[generationVariable].flatMap({ Int($0) }).flatMap(CipherGeneration.init(rawValue:)) else {
            throw UsageError("__rotation-child METHOD PATH TARGET, with the keys in the environment")
        }
        let (method, path, target) = (arguments[0], arguments[1], arguments[2])
        let startRSS = memoryStatus().currentKB
        let bytes = try fileSize(path)
        var rotation: RotationReport?
        let seconds: Double
        switch method {
        case "product":
            let cipher = CipherSettings(generation: generation, pageSize: pageSize)
            let keys = try KeyList(database: path, keys: [DatabaseKey(id: "old", source: .hex(oldKey), cipher: cipher),
                                                          DatabaseKey(id: "new", source: .hex(newKey), cipher: cipher)],
                                   environment: [:])
            seconds = try timedRegion {
                let database = try EncryptedDatabase(path: path, keys: keys)
                rotation = database.report.rotation
            }
            guard rotation != nil else { throw BenchmarkError("the product did not rotate") }
        case "rekey":
            seconds = try timedRegion {
                let db = try RawConnection(path: path, key: "x'\(oldKey)'")
                try db.exec(rawSettings(pageSize: pageSize, generation: generation))
                try db.verifyReadable()
                let key = "x'\(newKey)'"
                let code = key.withCString { sqlite3_rekey(db.handle, $0, Int32(strlen($0))) }
                guard code == SQLITE_OK else { throw db.error(code, "sqlite3_rekey") }
            }
        case "export":
            seconds = try timedRegion {
                // The attached file is created with the main connection's open flags.
                let db = try RawConnection(path: path, key: "x'\(oldKey)'", create: true)
                try db.exec(rawSettings(pageSize: pageSize, generation: generation))
                try db.verifyReadable()
                let attach = try db.prepare("ATTACH DATABASE ? AS rotated KEY ?")
                defer { sqlite3_finalize(attach) }
                rawBindText(attach, 1, target)
                rawBindText(attach, 2, "x'\(newKey)'")
                guard sqlite3_step(attach) == SQLITE_DONE else { throw db.error(sqlite3_errcode(db.handle), "ATTACH") }
                try db.exec(rawSettings(pageSize: pageSize, generation: generation).replacingOccurrences(of: "PRAGMA ", with: "PRAGMA rotated."))
                try db.exec("SELECT sqlcipher_export('rotated')")
                try db.exec("DETACH DATABASE rotated")
            }
        case "backup":
            seconds = try timedRegion {
                let source = try RawConnection(path: path, key: "x'\(oldKey)'")
                try source.exec(rawSettings(pageSize: pageSize, generation: generation))
                try source.verifyReadable()
                let destination = try RawConnection(path: target, key: "x'\(newKey)'", create: true)
                try destination.exec(rawSettings(pageSize: pageSize, generation: generation))
                guard let backup = sqlite3_backup_init(destination.handle, "main", source.handle, "main") else {
                    throw destination.error(sqlite3_errcode(destination.handle), "sqlite3_backup_init")
                }
                var code = SQLITE_OK
                repeat { code = sqlite3_backup_step(backup, 4096) } while code == SQLITE_OK
                sqlite3_backup_finish(backup)
                guard code == SQLITE_DONE else { throw destination.error(code, "sqlite3_backup_step") }
            }
        default:
            throw UsageError("unknown rotation method \(method)")
        }
        let outcome = Outcome(method: method, bytes: bytes, seconds: seconds, rotationSeconds: rotation?.totalDuration.seconds,
                              rotationMethod: rotation?.method.rawValue, verifySeconds: rotation?.verifyDuration.seconds,
                              peakRSSKB: memoryStatus().peakKB, startRSSKB: startRSS)
        FileHandle.standardOutput.write(try JSONEncoder().encode(outcome))
    }
}

func fileSize(_ path: String) throws -> Int64 {
    (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? 0
}

/// This executable's path, to re-execute it for child processes.
func selfExecutable() throws -> String {
    try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
}
