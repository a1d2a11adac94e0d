@testable import CipherFormats
@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Logging
@testable import SQLCipherConnection
import Testing
import TestSupport

/// Every log event the library emits, at every level (the handler is at `.trace`).
final class LogCapture: @unchecked Sendable {
    struct Entry: Sendable {
        let level: Logger.Level
        let text: String
    }

    private let lock = NSLock()
    // Invariant: only touched with `lock` held.
    private var captured: [Entry] = []

    var entries: [Entry] { lock.withLock { captured } }

    func add(_ entry: Entry) { lock.withLock { captured.append(entry) } }

    /// A logger at `.trace` that records into this capture.
    var logger: Logger {
        var logger = Logger(label: "secrets-test") { _ in CapturingLogHandler(capture: self) }
        logger.logLevel = .trace
        return logger
    }
}

struct CapturingLogHandler: LogHandler {
    let capture: LogCapture
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        var text = "\(event.level) \(event.message) \(all) source=\(event.source)"
        if let error = event.error { text += " error=\(error)" }
        capture.add(.init(level: event.level, text: text))
    }
}

/// The SQL SQLite saw on connections to files in one folder (see ``SQLObservation``).
final class SQLCapture: @unchecked Sendable {
    private let lock = NSLock()
    // Invariant: only touched with `lock` held.
    private var captured: [SQLObservation.Event] = []
    private var token: UUID?

    init(folder: String, trace: Bool) {
        token = SQLObservation.shared.observe(folder: folder, trace: trace) { [weak self] _, event in
            self?.lock.withLock { self?.captured.append(event) }
        }
    }

    func stop() {
        if let token { SQLObservation.shared.stop(token) }
        token = nil
    }

    deinit { stop() }

    var events: [SQLObservation.Event] { lock.withLock { captured } }

    /// Every text: prepared SQL, traced SQL and its expanded form.
    var texts: [String] {
        events.flatMap { event -> [String] in
            switch event {
            case .prepared(let sql): return [sql]
            case let .traced(sql, expanded): return [sql, expanded]
            }
        }
    }

    var tracedCount: Int { events.filter { if case .traced = $0 { true } else { false } }.count }
}

/// Drives the library through every path that touches keys, with marker keys of every source
/// kind: creation, opening, in-place rotation (automatic and explicit, with a reader pool), the
/// export path (plaintext encryption, a settings change, a legacy upgrade), migrations, a fleet,
/// inspection, and failures (wrong key, busy, read-only, bad configuration).
final class SecretScenarios {
    let directory: TemporaryDirectory
    let ring: TestKeyring
    let logger: Logger
    /// Values the scenarios print, dump and describe; checked by the caller.
    private(set) var renderings: [String] = []
    /// Reader keys derived by the library (raw key + salt), which are key material too.
    private(set) var derivedKeys: [String] = []

    init(directory: TemporaryDirectory, logger: Logger) {
        self.directory = directory
        self.logger = logger
        ring = TestKeyring([.passphrase, .hex, .envHex, .filePassphrase, .envPassphrase], in: directory)
    }

    var secrets: [String] { ring.keys.map(\.secret) + derivedKeys }

    func options(_ changes: (inout OpenOptions) -> Void = { _ in }) -> OpenOptions {
        var options = OpenOptions(busyTimeout: .milliseconds(300), logger: logger)
        changes(&options)
        return options
    }

    func render(_ values: Any...) {
        for value in values {
            renderings.append(String(describing: value))
            renderings.append(String(reflecting: value))
            renderings.append("\(value)")
            var dumped = ""
            dump(value, to: &dumped)
            renderings.append(dumped)
        }
    }

    func expectFailure(_ body: () throws -> Void) {
        do {
            try body()
            Issue.record("expected a failure")
        } catch {
            render(error)
            renderings.append(error.localizedDescription)
        }
    }

    /// The paths that never go through `sqlcipher_export` (safe to trace in SQLCipher 3.4.1).
    func runInPlacePaths() throws {
        let ring = ring
        let keys = { (path: String) throws -> KeyList in try ring.keyList(database: path) }

        // Creation, writes and reads.
        let created = directory.file("created.sqlite")
        let fresh = try EncryptedDatabase(path: created, keys: keys(created), options: options { $0.createIfMissing = true })
        try fresh.write { db in
            try db.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT)")
            try db.execute("INSERT INTO notes(text) VALUES (?)", ["a note"])
            render(db)
        }
        render(fresh, fresh.report, fresh.keys, try keys(created))

        // In-place rotation from each older key.
        for index in 0..<(ring.keys.count - 1) {
            let path = directory.file("rotate-\(index).sqlite")
            try Fixture.createWithShell(at: path, key: ring.keys[index].shellKey, rows: 10)
            let rotated = try EncryptedDatabase(path: path, keys: keys(path), options: options())
            #expect(rotated.report.rotated)
            render(rotated.report, rotated.report.rotation as Any)
            render(try EncryptedDatabase.check(path: path, keys: keys(path)))
        }

        // Explicit rotation with a reader pool (readers keyed with a derived raw key).
        let pooled = directory.file("pooled.sqlite")
        try Fixture.createWithShell(at: pooled, key: ring.keys[0].shellKey, rows: 10, walMode: true)
        let database = try EncryptedDatabase(path: pooled, keys: keys(pooled), options: options { $0.rotateToCurrentKey = false; $0.concurrentReaders = 2 })
        _ = try database.read { db in try db.queryValue("SELECT count(*) FROM people", as: Int.self) }
        derivedKeys.append(contentsOf: readerKeyHex(database))
        render(database)
        let rotation = try database.rotateToCurrentKey()
        render(rotation as Any)
        _ = try database.read { db in try db.queryValue("SELECT count(*) FROM people", as: Int.self) }
        derivedKeys.append(contentsOf: readerKeyHex(database))
        render(database, database.report)

        // A read-only open that asks for readers on a file not in WAL mode: a warning.
        let readOnly = try EncryptedDatabase(path: created, keys: keys(created), options: options { $0.readOnly = true; $0.concurrentReaders = 2 })
        render(readOnly)

        // Migrations on the keyed connection.
        var migrator = DatabaseMigrator()
        try migrator.registerSQLMigration("0001_tags", sql: "CREATE TABLE tags(name TEXT);\n-- down\nDROP TABLE tags;")
        try migrator.registerMigration("0002_fill") { db in try db.execute("INSERT INTO tags VALUES ('x')") }
        let migrated = try EncryptedDatabase(path: created, keys: keys(created), options: options(), migrator: migrator)
        render(migrator, migrator.migrations, migrated.appliedMigrations)

        // A fleet: one file to rotate, one current, one no key opens.
        let stranger = directory.file("stranger.sqlite")
        try Fixture.createWithShell(at: stranger, key: .passphrase(TestKeys.passphrase("stranger")), rows: 3)
        let fleetFile = directory.file("fleet.sqlite")
        try Fixture.createWithShell(at: fleetFile, key: ring.keys[1].shellKey, rows: 3)
        let fleet = FleetRotation(databases: try [fleetFile, created, stranger].map { FleetDatabase(path: $0, keys: try keys($0)) }, jobs: 2, options: options())
        let report = fleet.run { progress, outcome in _ = (progress, outcome) }
        #expect(report.failures.count == 1)
        render(fleet, report, report.outcomes, report.failures)

        // Inspection: state, dump, decrypted copy.
        render(try DatabaseInspection.state(path: created, keys: keys(created)))
        var dumped: [String] = []
        try DatabaseInspection.dump(path: created, keys: keys(created)) { dumped.append($0) }
        renderings.append(dumped.joined(separator: "\n"))

        // Failures: no key opens, read-only on an old key, busy, bad configuration.
        expectFailure { _ = try EncryptedDatabase(path: stranger, keys: keys(stranger), options: options()) }
        let old = directory.file("old.sqlite")
        try Fixture.createWithShell(at: old, key: ring.keys[1].shellKey, rows: 3)
        expectFailure { _ = try EncryptedDatabase(path: old, keys: keys(old), options: options { $0.readOnly = true }) }
        let holder = try ShellHolder.exclusiveLock(on: old, key: ring.keys[1].shellKey)
        expectFailure { _ = try EncryptedDatabase(path: old, keys: keys(old), options: options()) }
        holder.release()
        expectFailure { _ = try KeyList(database: old, keys: [.init(id: "dup", source: .passphrase(ring.keys[0].secret)), .init(id: "dup2", source: .passphrase(ring.keys[0].secret))]) }
        expectFailure { _ = try KeyList(database: old, keys: [.init(id: "bad", source: .hex(ring.keys[1].secret + "0"))]) }
    }

    /// The export path (which SQLCipher 3.4.1 cannot run with a trace hook).
    func runExportPaths() throws {
        // Plaintext → encrypted.
        let plain = directory.file("plain.sqlite")
        try SQLiteShell.createFixture(at: plain, rows: 10)
        let plainKeys = try KeyList(database: plain, keys: [.plaintext(id: "v1")] + ring.keys.map(\.key), environment: ring.environment)
        let encrypted = try EncryptedDatabase(path: plain, keys: plainKeys, options: options())
        #expect(encrypted.report.rotation?.method == .export)
        render(encrypted, encrypted.report)

        // A settings change on the current key's material: 2 KiB pages, which neither engine's
        // default format has (1 KiB on SQLCipher 3, 4 KiB on SQLCipher 4), so the new key is not a
        // duplicate of the old one's material and settings.
        let settings = directory.file("settings.sqlite")
        try Fixture.createWithShell(at: settings, key: ring.keys[1].shellKey, rows: 10)
        let moved = try KeyList(database: settings, keys: [ring.keys[1].key, DatabaseKey(id: "k2-2k", source: ring.keys[1].key.source, cipher: CipherSettings(pageSize: 2048))], environment: ring.environment)
        let changed = try EncryptedDatabase(path: settings, keys: moved, options: options())
        #expect(changed.report.rotation?.method == .export)
        render(changed, moved)

        // A legacy (SQLCipher 2 settings) file: SQLCipher 4's shell needs the compatibility
        // pragma, SQLCipher 3.4.1's (which ignores it) only kdf_iter.
        let legacy = directory.file("legacy.sqlite")
        let result = try SQLCipherShell.run(legacy, key: ring.keys[0].shellKey, "PRAGMA cipher_compatibility = 2;\nPRAGMA kdf_iter = 4000;\n" + Fixture.sql(rows: 10))
        #expect(result.status == 0)
        let legacyKeys = try KeyList(database: legacy, keys: [DatabaseKey(id: "k1-legacy", source: ring.keys[0].key.source, legacy: true)] + ring.keys.dropFirst().map(\.key), environment: ring.environment)
        let upgraded = try EncryptedDatabase(path: legacy, keys: legacyKeys, options: options())
        #expect(upgraded.report.rotation?.method == .export)
        render(upgraded, legacyKeys)

        // A decrypted copy (an export to an unencrypted file).
        try DatabaseInspection.decryptedCopy(path: settings, keys: moved, to: directory.file("plain-copy.sqlite"))

        // A leftover temporary of an interrupted export, removed with a notice.
        _ = FileManager.default.createFile(atPath: directory.file(".plain.sqlite.0badc0de.rekey-export"), contents: Data("leftover".utf8))
        _ = try EncryptedDatabase(path: plain, keys: plainKeys, options: options())
    }

    /// The hex of the reader pool's derived keys (`x'<key><salt>'` without the quotes).
    func readerKeyHex(_ database: EncryptedDatabase) -> [String] {
        guard let key = database.readers?.readerKey.material else { return [] }
        let text = key.withSQLCipherBytes { String(decoding: $0, as: UTF8.self) }
        guard text.hasPrefix("x'"), text.count > 66 else { return [] }
        let hex = String(text.dropFirst(2).dropLast())
        TestSecrets.register(hex)
        return [String(hex.prefix(64)), hex]
    }
}

@Suite("Secrets: no key material in logs, SQL, descriptions or dumps; buffers zeroed", .ownThread)
struct SecretsTests {
    @Test("swift-log at every level, descriptions, dumps and errors of every path that touches keys hold no key material")
    func logsAndRenderings() throws {
        let directory = TemporaryDirectory("secrets-logs")
        let capture = LogCapture()
        let sql = SQLCapture(folder: directory.path, trace: false)
        let scenarios = SecretScenarios(directory: directory, logger: capture.logger)
        try scenarios.runInPlacePaths()
        try scenarios.runExportPaths()
        sql.stop()

        let entries = capture.entries
        let levels = Set(entries.map(\.level))
        #expect(levels.isSuperset(of: [.info, .notice, .warning]), "levels seen: \(levels)")
        #expect(entries.count > 20, "\(entries.count) log events")
        let secrets = scenarios.secrets
        #expect(scenarios.derivedKeys.count >= 2, "the reader pool's derived key was not captured")
        for entry in entries {
            #expect(SecretScan.leaks(of: secrets, in: entry.text).isEmpty && !entry.text.contains("MARKER"), "key material logged: \(entry.text)")
        }
        for text in scenarios.renderings {
            #expect(SecretScan.leaks(of: secrets, in: text).isEmpty && !text.contains("MARKER"), "key material in a description or dump: \(text.prefix(2000))")
        }
        // The SQL the library prepared on every connection, the export path's ATTACH included.
        let texts = sql.texts
        #expect(texts.contains("ATTACH DATABASE ? AS rekey_export KEY ?"), "the export path's SQL was not observed")
        // The legacy settings: SQLCipher 4 names the generation, 3.4.1 (no such pragma) sets kdf_iter.
        let legacySettings = SQLCipherEngine.linked.major >= 4 ? "PRAGMA cipher_compatibility = 2" : "PRAGMA kdf_iter = 4000"
        #expect(texts.contains { $0.hasPrefix(legacySettings) }, "the legacy settings' SQL was not observed")
        for text in texts {
            #expect(SecretScan.leaks(of: secrets, in: text).isEmpty && !text.contains("MARKER"), "key material in SQL: \(text)")
        }
        print("secrets: \(entries.count) log events at levels \(levels.map(\.rawValue).sorted()), \(scenarios.renderings.count) renderings, \(texts.count) SQL texts checked")
    }

    @Test("every statement SQLite runs (sqlite3_trace_v2, with bound values expanded) holds no key material on the paths that can be traced")
    func tracedSQL() throws {
        let directory = TemporaryDirectory("secrets-trace")
        let sql = SQLCapture(folder: directory.path, trace: true)
        let scenarios = SecretScenarios(directory: directory, logger: Logger(label: "quiet") { _ in SwiftLogNoOpLogHandler() })
        try scenarios.runInPlacePaths()

        // Control: a value bound by the application does show in the expanded SQL, so a key bound
        // as a value (or written into SQL) would be caught here.
        let control = "MARKER-control-\(UUID().uuidString)"
        let path = directory.file("created.sqlite")
        let database = try EncryptedDatabase(path: path, keys: scenarios.ring.keyList(database: path))
        try database.write { db in try db.execute("INSERT INTO notes(text) VALUES (?)", [control]) }
        sql.stop()
        #expect(sql.texts.contains { $0.contains(control) }, "the trace does not show bound values; the check below would prove nothing")

        #expect(sql.tracedCount > 100, "\(sql.tracedCount) traced statements")
        let secrets = scenarios.secrets
        for text in sql.texts where !text.contains(control) {
            #expect(SecretScan.leaks(of: secrets, in: text).isEmpty && !text.contains("MARKER"), "key material in SQL: \(text)")
        }
        print("secrets: \(sql.tracedCount) traced statements, \(sql.texts.count) SQL texts checked")
    }

    @Test("key material never shows in description, debugDescription, String(reflecting:) or dump() of any public type that holds or touches keys")
    func publicTypes() throws {
        let directory = TemporaryDirectory("secrets-types")
        let passphrase = TestKeys.passphrase("types")
        let hex = TestKeys.hex()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255) }
        let bytesHex = bytes.map { String(format: "%02x", $0) }.joined()
        TestSecrets.register(bytesHex)
        let keyFile = TestKeys.writeKeyFile(passphrase + "-file", in: directory, name: "file.key")
        let environment = ["SECRETS_TYPES_KEY": hex]
        let yaml = """
            databases:
              - path: app.sqlite
                keys:
                  - id: old
                    passphrase: "\(passphrase)"
                  - id: file
                    file: file.key
                  - id: env
                    env: SECRETS_TYPES_KEY
                    format: hex
                  - id: raw
                    hex: \(TestKeys.hex())
                    cipher: {kdf_iter: 10000}
            """
        _ = FileManager.default.createFile(atPath: directory.file("Keys"), contents: Data(yaml.utf8), attributes: [.posixPermissions: 0o600])
        let keysFile = try KeysFile.load(path: directory.file("Keys"))
        let keys = try keysFile.keyList(forDatabase: directory.file("app.sqlite"), environment: environment)
        let sources: [KeySource] = [.passphrase(passphrase), .hex(hex), .environment(variable: "SECRETS_TYPES_KEY", format: .hex),
                                    .file(path: keyFile), .material(try KeyMaterial.rawKey(bytes: bytes)), .plaintext]
        let materials: [KeyMaterial] = [try .passphrase(passphrase), try .rawKey(hex: hex), try .rawKey(bytes: bytes)]
        let database = try EncryptedDatabase(path: directory.file("app.sqlite"), keys: keys,
                                             options: OpenOptions(createIfMissing: true, concurrentReaders: 2))
        _ = try database.read { db in try db.queryValue("SELECT 1", as: Int.self) }
        let fleetDatabase = FleetDatabase(path: directory.file("app.sqlite"), keys: keys)
        let values: [Any] = [
            materials, sources, sources.map { DatabaseKey(id: "id", source: $0, cipher: CipherSettings(kdfIterations: 4000), legacy: true) },
            keys, keysFile, keysFile.entries, OpenOptions(), database, database.report, database.keys, fleetDatabase,
            FleetDatabase.all(in: keysFile, environment: environment), ResolvedKey(id: "r", material: materials[0]),
            database.readers?.readerKey.material as Any, KeyMaterialProblem.containsNUL(position: 3),
        ]
        for value in values {
            var dumped = ""
            dump(value, to: &dumped)
            for text in [String(describing: value), String(reflecting: value), "\(value)", dumped] {
                #expect(SecretScan.leaks(of: [passphrase, hex, bytesHex], in: text).isEmpty && !text.contains("MARKER"), "key material in: \(text.prefix(3000))")
            }
        }
    }

    @Test("every public error type's localizedDescription is its description, and holds no key material")
    func localizedDescriptions() throws {
        let secret = TestKeys.passphrase("errors")
        let database = EncryptedDatabaseError.noKeyOpens(path: "/db", triedKeyIDs: ["a"])
        let keys = KeyConfigurationError.invalidMaterial(keyID: "a", database: "/db", source: "passphrase", problem: .containsNUL(position: 3))
        let errors: [any Error] = [
            database, keys, KeyMaterialProblem.empty, KeyMaterialProblem.wrongHexLength(digits: 3), MigrationError.emptyIdentifier,
            MigrationError.irreversible(identifier: "0001"), SQLiteError.from(handle: nil, code: 5, sql: "PRAGMA key = '\(secret)'"),
            StatementError.argumentCountMismatch(expected: 1, given: 2, sql: "SELECT ?"), FleetFailure.database(database), FleetFailure.keys(keys),
            RecordError.notFound(table: "t", key: "1"),
        ]
        for error in errors {
            #expect(error.localizedDescription == "\(error)", "\(type(of: error)): \(error.localizedDescription)")
            #expect(!error.localizedDescription.contains("The operation could not be completed"))
            #expect(SecretScan.leaks(of: [secret], in: error.localizedDescription).isEmpty)
        }
    }

    @Test("an application that writes a key into SQL text is refused, and the error does not repeat the statement")
    func keyAsSQL() throws {
        let scratch = try Scratch()
        let secret = TestKeys.passphrase("as-sql")
        let hex = TestKeys.hex()
        let pragmas = [
            "PRAGMA key = '\(secret)'", "pragma main.rekey = '\(secret)'", "PRAGMA hexkey = '\(hex)'", "PRAGMA \"hexrekey\" = '\(hex)'",
        ]
        // ATTACH with a literal key is allowed (the application's choice); it fails here because
        // the folder does not exist, and that error must not repeat the key.
        let attaches = [
            "ATTACH DATABASE '\(scratch.directory.file("absent/other.sqlite"))' AS other KEY '\(secret)'",
            "ATTACH '\(scratch.directory.file("absent/other2.sqlite"))' AS o2 KEY \"x'\(hex)'\"",
        ]
        for sql in pragmas + attaches {
            var migrator = DatabaseMigrator()
            try migrator.registerSQLMigration("0001_bad", sql: "CREATE TABLE IF NOT EXISTS t(a);\n" + sql + ";")
            var attempts: [() throws -> Void] = [{ try scratch.run { db in try db.execute(sql) } }, { try scratch.run { db in _ = try migrator.migrate(db) } }]
            if pragmas.contains(sql) { attempts.append { try scratch.run { db in _ = try db.prepare(sql) } } }
            for attempt in attempts {
                do {
                    try attempt()
                    Issue.record("\(sql.prefix(12)) was accepted")
                } catch {
                    var dumped = ""
                    dump(error, to: &dumped)
                    for text in ["\(error)", error.localizedDescription, dumped] {
                        #expect(SecretScan.leaks(of: [secret, hex], in: text).isEmpty && !text.contains("MARKER"), "the key is repeated in: \(text)")
                    }
                }
            }
        }
        // The library's own ATTACH binds its key, so its SQL is kept in errors.
        #expect(SQLiteError.withoutKeyMaterial("ATTACH DATABASE ? AS rekey_export KEY ?") == "ATTACH DATABASE ? AS rekey_export KEY ?")
        #expect(SQLiteError.withoutKeyMaterial("ATTACH 'monkey.db' AS keystore") == "ATTACH 'monkey.db' AS keystore")
    }

    @Test("SecretBytes zeroes every key buffer before its memory is freed (key files, passphrases, raw and derived keys)")
    func zeroing() throws {
        final class Seen: @unchecked Sendable {
            let lock = NSLock()
            var buffers = 0
            var nonZero = 0
            var watchedSeen = false
            var watched: UnsafeRawPointer?
        }
        let seen = Seen()
        let token = SecretBytes.zeroingObserver.add { buffer in
            let zero = buffer.allSatisfy { $0 == 0 }
            seen.lock.withLock {
                seen.buffers += 1
                if !zero { seen.nonZero += 1 }
                if buffer.baseAddress == seen.watched { seen.watchedSeen = zero }
            }
        }
        defer { SecretBytes.zeroingObserver.remove(token) }

        // One buffer followed by address: it holds the passphrase while alive, zeros when freed.
        let passphrase = TestKeys.passphrase("zero")
        do {
            let material = try KeyMaterial.passphrase(passphrase)
            let (address, content) = material.withSQLCipherBytes { ($0.baseAddress, String(decoding: $0, as: UTF8.self)) }
            #expect(content == passphrase)
            seen.lock.withLock { seen.watched = address }
        }
        #expect(seen.lock.withLock { seen.watchedSeen }, "the passphrase's buffer was not seen zeroed when freed")

        // Every other kind: key files, environment values, hex, derived reader keys.
        let directory = TemporaryDirectory("zeroing")
        do {
            let ring = TestKeyring([.filePassphrase, .fileHex, .envHex, .passphrase], in: directory)
            let path = directory.file("z.sqlite")
            try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 5, walMode: true)
            let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: OpenOptions(concurrentReaders: 2))
            _ = try database.read { db in try db.queryValue("SELECT count(*) FROM people", as: Int.self) }
        }
        let (buffers, nonZero) = seen.lock.withLock { (seen.buffers, seen.nonZero) }
        #expect(buffers >= 8, "\(buffers) buffers freed")
        #expect(nonZero == 0, "\(nonZero) of \(buffers) key buffers were freed without being zeroed")
    }
}
