import EncryptedSQLite
import Foundation
import InMemoryTracing
import Instrumentation
import Metrics
import MetricsTestKit
import Testing
import TestSupport
import Tracing

/// The test backends, bootstrapped once for the whole test process (the packages allow one
/// bootstrap per process). Tests running meanwhile emit into them too, so each test looks only at
/// what carries its own key ids and paths.
enum TelemetryBackends {
    static let metrics: TestMetrics = {
        let metrics = TestMetrics()
        MetricsSystem.bootstrap(metrics)
        return metrics
    }()
    static let tracer: InMemoryTracer = {
        let tracer = InMemoryTracer()
        InstrumentationSystem.bootstrap(tracer)
        return tracer
    }()

    static func bootstrap() {
        _ = metrics
        _ = tracer
    }
}

@Suite("Metrics and tracing (swift-metrics TestMetrics, InMemoryTracer)")
struct TelemetryTests {
    let directory = TemporaryDirectory("telemetry")

    static func value(_ attributes: SpanAttributes, _ name: String) -> String? {
        if case .string(let text)? = attributes.get(name) { return text }
        return nil
    }

    @Test("one open that rotates: opens, keys tried, KDF runs, the rotation by method with bytes and duration; spans open ⊃ rotate with key ids, path and strategy; no key material anywhere")
    func rotation() throws {
        TelemetryBackends.bootstrap()
        let metrics = TelemetryBackends.metrics, tracer = TelemetryBackends.tracer
        let tag = UUID().uuidString.prefix(6)
        let ring = TestKeyring([.passphrase, .passphrase], in: directory, idPrefix: "tel-\(tag)-")
        let path = directory.file("app-\(tag).sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 300)
        let kdfBefore = metrics.counterTotal(label: "encryptedsqlite_kdf_runs_total")

        let database = try EncryptedDatabase(path: path, keys: try ring.keyList(database: path))
        let rotation = try #require(database.report.rotation)
        let (from, to) = (ring.keys[0].id, ring.keys[1].id)
        let method = rotation.method.rawValue

        let rotations = metrics.counters(label: "encryptedsqlite_rotations_total", dimensions: [("method", method), ("from_key", from), ("to_key", to)])
        #expect(rotations.map(\.totalValue) == [1])
        #expect(metrics.counterTotal(label: "encryptedsqlite_rotation_bytes_total", dimensions: [("method", method)]) >= rotation.bytes)
        #expect(metrics.timers(label: "encryptedsqlite_rotation_duration", dimensions: [("method", method)]).first?.values.contains(rotation.totalDuration.nanoseconds) == true)
        #expect(metrics.counterTotal(label: "encryptedsqlite_opens_total", dimensions: [("outcome", "rotated")]) >= 1)
        #expect(metrics.recorders(label: "encryptedsqlite_open_keys_tried").contains { $0.values.contains(2) }, "current key tried first, then the old one")
        #expect(metrics.counterTotal(label: "encryptedsqlite_kdf_runs_total") > kdfBefore, "the passphrases were derived")

        let spans = tracer.finishedSpans.filter { Self.value($0.attributes, "db.path") == path }
        let open = try #require(spans.first { $0.operationName == "encryptedsqlite.open" })
        let rotate = try #require(spans.first { $0.operationName == "encryptedsqlite.rotate" })
        #expect(rotate.parentSpanID == open.spanID && rotate.traceID == open.traceID, "the rotation's span is a child of the open's")
        #expect(Self.value(rotate.attributes, "from_key") == from && Self.value(rotate.attributes, "to_key") == to)
        #expect(Self.value(rotate.attributes, "strategy") == "automatic")

        // No dimension or attribute holds key material.
        var shown: [String] = []
        for counter in metrics.counters { shown += counter.dimensions.map { "\($0.0)=\($0.1)" } }
        for span in spans { span.attributes.forEach { name, value in shown.append("\(name)=\(value)") } }
        for key in ring.keys { #expect(!shown.joined(separator: " ").contains(key.secret)) }

        // What one rotation emitted, for the record (Benchmarks/README.md, the issue's closing note).
        var lines = ["rotations_total{method=\(method),from_key=\(from),to_key=\(to)} \(rotations.first?.totalValue ?? 0)",
                     "rotation_bytes (this rotation) \(rotation.bytes)", "rotation_duration_ns \(rotation.totalDuration.nanoseconds)",
                     "open_keys_tried 2",
                     "spans: " + spans.map { "\($0.operationName)(parent: \($0.parentSpanID == nil ? "none" : $0.parentSpanID == open.spanID ? "open" : "?"))" }.joined(separator: ", ")]
        lines.append("all counters now: " + metrics.counters.filter { $0.label.hasPrefix("encryptedsqlite_") }
            .map { "\($0.label){\($0.dimensions.map { "\($0.0)=\($0.1)" }.joined(separator: ","))} \($0.totalValue)" }.sorted().joined(separator: "; "))
        print("telemetry of one rotation:\n  " + lines.joined(separator: "\n  "))
    }

    @Test("a backup and migrations: counters, timers and spans")
    func backupAndMigrations() throws {
        TelemetryBackends.bootstrap()
        let metrics = TelemetryBackends.metrics, tracer = TelemetryBackends.tracer
        let tag = UUID().uuidString.prefix(6)
        let ring = TestKeyring([.hex], in: directory, idPrefix: "bk-\(tag)-")
        let path = directory.file("m-\(tag).sqlite")
        var migrator = DatabaseMigrator()
        try migrator.registerMigration("0001_notes") { db in try db.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)") }
        try migrator.registerMigration("0002_seed") { db in try db.execute("INSERT INTO notes(body) VALUES ('a'), ('b')") }
        let migrationsBefore = metrics.counterTotal(label: "encryptedsqlite_migrations_applied_total")
        let database = try EncryptedDatabase(path: path, keys: try ring.keyList(database: path), options: OpenOptions(createIfMissing: true), migrator: migrator)
        #expect(database.appliedMigrations.count == 2)
        #expect(metrics.counterTotal(label: "encryptedsqlite_migrations_applied_total") >= migrationsBefore + 2)
        #expect(!metrics.timers(label: "encryptedsqlite_migration_duration").isEmpty)

        let target = directory.file("m-\(tag)-backup.sqlite")
        let report = try database.backup(to: target)
        let backups = metrics.counters(label: "encryptedsqlite_backups_total", dimensions: [("method", report.method.rawValue), ("key", ring.keys[0].id)])
        #expect(backups.map(\.totalValue) == [1])
        #expect(metrics.counterTotal(label: "encryptedsqlite_backup_bytes_total", dimensions: [("method", report.method.rawValue)]) >= report.bytes)

        let spans = tracer.finishedSpans.filter { Self.value($0.attributes, "db.path") == path }
        #expect(spans.contains { $0.operationName == "encryptedsqlite.migrate" })
        let backup = try #require(spans.first { $0.operationName == "encryptedsqlite.backup" })
        #expect(Self.value(backup.attributes, "backup.path") == target && Self.value(backup.attributes, "key") == ring.keys[0].id)

        // A failed backup is recorded on its span.
        #expect(throws: EncryptedDatabaseError.self) { try database.backup(to: target) }
        let failed = tracer.finishedSpans.filter { Self.value($0.attributes, "db.path") == path && $0.operationName == "encryptedsqlite.backup" }
        #expect(failed.contains { !$0.errors.isEmpty && $0.status?.code == .error })
    }

    @Test("a database that follows a rotation made elsewhere counts it: live re-keys by from/to key and outcome")
    func liveRekey() throws {
        TelemetryBackends.bootstrap()
        let metrics = TelemetryBackends.metrics
        let dimensions = [("from_key", "key-0"), ("to_key", "key-1"), ("outcome", "followed")]
        let before = metrics.counterTotal(label: "encryptedsqlite_live_rekeys_total", dimensions: dimensions)
        var setup = try RotationElsewhereTests.Setup()
        let database = try EncryptedDatabase(path: setup.path, keysFile: setup.keysFile)
        try setup.rotateElsewhere()
        try database.write { db in try db.execute("INSERT INTO notes(text) VALUES ('after')") }
        #expect(metrics.counterTotal(label: "encryptedsqlite_live_rekeys_total", dimensions: dimensions) >= before + 1)
    }
}
