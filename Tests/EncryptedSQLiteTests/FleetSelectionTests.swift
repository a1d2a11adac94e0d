@testable import EncryptedSQLite
@testable import KeyConfiguration
import Foundation
import Testing
import TestSupport

private final class Recorder: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [(done: Int, path: String)] = []
    func add(_ done: Int, _ path: String) { lock.withLock { values.append((done, path)) } }
    var all: [(done: Int, path: String)] { lock.withLock { values } }
}

/// A folder with a Keys file naming `app.sqlite` (on the old key), `current.sqlite` (on the
/// current key), `missing.sqlite` (listed, absent) and `tenants/*.sqlite` (two files on the old
/// key, and a file of random bytes).
private struct SelectionFolder {
    let directory = TemporaryDirectory("selection")
    let ring: TestKeyring
    let keysPath: String

    init() throws {
        ring = TestKeyring([.passphrase, .hex], in: directory)
        try FileManager.default.createDirectory(atPath: directory.file("tenants"), withIntermediateDirectories: false)
        try Fixture.createWithShell(at: directory.file("app.sqlite"), key: ring.keys[0].shellKey, rows: 10)
        try Fixture.createWithShell(at: directory.file("current.sqlite"), key: ring.keys[1].shellKey, rows: 10)
        for name in ["a", "b"] {
            try TestFiles.copy(directory.file("app.sqlite"), to: directory.file("tenants/\(name).sqlite"))
        }
        _ = FileManager.default.createFile(atPath: directory.file("tenants/c.sqlite"), contents: Data((0..<4096).map { _ in UInt8.random(in: 0...255) }))
        let yaml = ring.yaml(databasePath: "app.sqlite")
            + TestKeyring.yamlEntry(path: "current.sqlite", plaintextID: nil, keys: ring.keys)
            + TestKeyring.yamlEntry(path: "missing.sqlite", plaintextID: nil, keys: ring.keys)
            + TestKeyring.yamlEntry(path: "tenants/*.sqlite", plaintextID: nil, keys: ring.keys)
        keysPath = directory.file("Keys")
        _ = FileManager.default.createFile(atPath: keysPath, contents: Data(yaml.utf8), attributes: [.posixPermissions: 0o600])
    }

    func keysFile() throws -> KeysFile { try KeysFile.load(path: keysPath) }

    var everyPath: [String] {
        ["app.sqlite", "current.sqlite", "missing.sqlite", "tenants/a.sqlite", "tenants/b.sqlite", "tenants/c.sqlite"].map(directory.file)
    }
}

@Suite("Fleet selection, inspection and limits (library API)")
struct FleetSelectionTests {
    @Test("a file named twice (relative and absolute, or through a path with ./ and ..) is selected once, so no two workers rotate it at once")
    func sameFileOnce() throws {
        let folder = try SelectionFolder()
        let keysFile = try folder.keysFile()
        let app = folder.directory.file("app.sqlite")
        let detour = folder.directory.file("tenants/../app.sqlite")
        let selection = DatabaseSelection(paths: [app, detour, folder.directory.file("./app.sqlite")], all: true)
        let databases = try selection.databases(in: keysFile, environment: folder.ring.environment)
        #expect(databases.map(\.path) == folder.everyPath)
        #expect(Set(databases.map { KeysFile.canonical($0.path) }).count == databases.count)
    }

    @Test("a selection resolves named paths first, in order, then every other database of the Keys file in file order, each once")
    func selectionOrder() throws {
        let folder = try SelectionFolder()
        let keysFile = try folder.keysFile()

        let all = try DatabaseSelection.all.databases(in: keysFile, environment: folder.ring.environment)
        #expect(all.map(\.path) == folder.everyPath)
        #expect(all.allSatisfy { (try? $0.keys.get()) != nil })

        let tenantB = folder.directory.file("tenants/b.sqlite"), current = folder.directory.file("current.sqlite")
        let mixed = try DatabaseSelection(paths: [tenantB, current], all: true).databases(in: keysFile, environment: folder.ring.environment)
        #expect(mixed.map(\.path) == [tenantB, current] + folder.everyPath.filter { $0 != tenantB && $0 != current })

        let one = try DatabaseSelection.one(current).databases(in: keysFile, environment: folder.ring.environment)
        #expect(one.map(\.path) == [current])
        #expect(try one[0].keys.get().currentID == "k2")
        #expect(DatabaseSelection.one(current) == DatabaseSelection(paths: [current]))
        #expect(DatabaseSelection.all.isEmpty == false && DatabaseSelection().isEmpty)
    }

    @Test("a path the Keys file does not list is that database's key failure, not an error; the others still resolve")
    func unlistedPath() throws {
        let folder = try SelectionFolder()
        let keysFile = try folder.keysFile()
        let unlisted = folder.directory.file("unlisted.sqlite")
        let app = folder.directory.file("app.sqlite")
        let databases = try DatabaseSelection(paths: [unlisted, app]).databases(in: keysFile, environment: folder.ring.environment)
        #expect(databases.map(\.path) == [unlisted, app])
        guard case .failure(let error) = databases[0].keys else {
            Issue.record("an unlisted path resolved to a key list")
            return
        }
        let listed = ["app.sqlite", "current.sqlite", "missing.sqlite", "tenants/*.sqlite"]
        #expect(error == .databaseNotConfigured(database: unlisted, resolvedPath: unlisted, keysFile: folder.keysPath, configured: listed, resolvedConfigured: listed.map(folder.directory.file)))
        #expect(try databases[1].keys.get().currentID == "k2")
    }

    @Test("nothing selected, and every database when the Keys file names none, throw; a Keys file that cannot be loaded fails each named path, or throws for all alone")
    func selectionErrors() throws {
        let folder = try SelectionFolder()
        #expect(throws: DatabaseSelectionError.nothingSelected) {
            try DatabaseSelection().databases(in: try folder.keysFile())
        }
        #expect(throws: DatabaseSelectionError.nothingSelected) {
            try DatabaseSelection(paths: []).databases(inKeysFileAt: folder.keysPath)
        }

        // A glob that matches no file: nothing to do is a usage problem, said with the Keys file's path.
        let empty = folder.directory.file("EmptyKeys")
        let yaml = TestKeyring.yamlEntry(path: "nowhere/*.sqlite", plaintextID: nil, keys: folder.ring.keys)
        _ = FileManager.default.createFile(atPath: empty, contents: Data(("databases:\n" + yaml).utf8), attributes: [.posixPermissions: 0o600])
        #expect(throws: DatabaseSelectionError.noDatabases(keysFile: empty)) {
            try DatabaseSelection.all.databases(inKeysFileAt: empty)
        }
        let error = DatabaseSelectionError.noDatabases(keysFile: empty)
        #expect(error.description == "the Keys file \(empty) names no database (its patterns match no file); check its paths and glob patterns")
        #expect(error.localizedDescription == error.description)
        // …but a named path is still worked on.
        let named = try DatabaseSelection(paths: ["x.sqlite"], all: true).databases(inKeysFileAt: empty)
        #expect(named.map(\.path) == ["x.sqlite"])

        // The Keys file is missing: each named path carries the error (all adds nothing); all alone throws it.
        let nope = folder.directory.file("Nope")
        let failed = try DatabaseSelection(paths: ["a.sqlite", "b.sqlite"], all: true).databases(inKeysFileAt: nope)
        #expect(failed.map(\.path) == ["a.sqlite", "b.sqlite"])
        for database in failed {
            guard case .failure(let keyError) = database.keys else {
                Issue.record("\(database.path) has a key list without a Keys file")
                continue
            }
            #expect(keyError == .keysFileMissing(path: nope))
        }
        #expect(throws: DatabaseSelectionError.keysFile(.keysFileMissing(path: nope))) {
            try DatabaseSelection.all.databases(inKeysFileAt: nope)
        }
        #expect(DatabaseSelectionError.keysFile(.keysFileMissing(path: nope)).description == KeyConfigurationError.keysFileMissing(path: nope).description)
    }

    @Test("a fleet inspection reads every state in order without changing a file; failures carry their kind; jobs do not change the order")
    func inspection() throws {
        let folder = try SelectionFolder()
        let unlisted = folder.directory.file("unlisted.sqlite")
        let databases = try DatabaseSelection(paths: [unlisted], all: true).databases(inKeysFileAt: folder.keysPath, environment: folder.ring.environment)
        let snapshots = folder.everyPath.filter { FileManager.default.fileExists(atPath: $0) }.map { ($0, FileSnapshot($0)) }

        let recorder = Recorder()
        let report = FleetInspection(databases: databases).run { progress, outcome in recorder.add(progress.done, outcome.path) }
        #expect(report.outcomes.map(\.path) == [unlisted] + folder.everyPath)
        #expect(recorder.all.map(\.done) == Array(1...7))
        #expect(recorder.all.map(\.path) == report.outcomes.map(\.path), "one job reports in order")
        #expect(report.jobs == 1)
        for (path, snapshot) in snapshots { #expect(FileSnapshot(path) == snapshot, "\(path) changed") }

        #expect(report.states.map(\.path) == ["app.sqlite", "current.sqlite", "tenants/a.sqlite", "tenants/b.sqlite"].map(folder.directory.file))
        #expect(report.states.map(\.openedWithKeyID) == ["k1", "k2", "k1", "k1"])
        #expect(report.needingRotation == 3)
        #expect(report.failures.map(\.path) == [unlisted, folder.directory.file("missing.sqlite"), folder.directory.file("tenants/c.sqlite")])
        #expect(report.failures.map(\.failure.kind) == ["keys", "missingFile", "unreadableContent"])
        #expect(report.failures[1].failure.reason == "missing")
        #expect(!report.succeeded)
        #expect(report.outcomes[1].state == (try DatabaseInspection.state(path: folder.directory.file("app.sqlite"), keys: try folder.ring.keyList(database: folder.directory.file("app.sqlite")))))

        let parallel = FleetInspection(databases: databases, jobs: 3).run()
        #expect(parallel.jobs == 3)
        #expect(parallel.outcomes.map(\.path) == report.outcomes.map(\.path))
        #expect(parallel.states == report.states)
        #expect(parallel.failures.map(\.failure) == report.failures.map(\.failure))
    }

    @Test("limits are defined once: jobs are clamped into FleetLimits.jobs, threads match OpenOptions, busy timeouts are checked and converted")
    func limits() {
        #expect(FleetLimits.jobs == 1...256)
        #expect(FleetLimits.rotationThreads == 1...OpenOptions.maximumRotationThreads)
        #expect(FleetRotation(databases: [], jobs: 0).jobs == 1)
        #expect(FleetRotation(databases: [], jobs: 10_000).jobs == FleetLimits.jobs.upperBound)
        #expect(FleetInspection(databases: [], jobs: -3).jobs == 1)
        #expect(FleetInspection(databases: [], jobs: 300).jobs == FleetLimits.jobs.upperBound)

        #expect(FleetLimits.busyTimeout(seconds: 2.5) == .milliseconds(2500))
        #expect(FleetLimits.busyTimeout(seconds: 0) == .zero)
        #expect(FleetLimits.busyTimeout(seconds: 86_400) == .seconds(86_400))
        for bad in [-0.001, 86_400.001, .nan, .infinity, -.infinity] {
            #expect(FleetLimits.busyTimeout(seconds: bad) == nil, "\(bad)")
        }
    }

    @Test("labels for reports: result labels, failure kinds and reasons, rotation method names")
    func labels() {
        #expect(FleetResult.failed(.database(.busy(path: "x", detail: "locked"))).label == "failed")
        #expect(FleetFailure.database(.busy(path: "x", detail: "locked")).kind == "busy")
        #expect(FleetFailure.database(.busy(path: "x", detail: "locked")).reason == "locked by another process")
        #expect(FleetFailure.keys(.emptyKeyList(database: "x")).kind == "keys")
        #expect(FleetFailure.keys(.emptyKeyList(database: "x")).reason.hasPrefix("key configuration ("))
        #expect([RotationMethod.pageReencryption, .inPlace, .export].map(\.name) == ["page re-encryption", "engine rekey", "export"])
    }
}
