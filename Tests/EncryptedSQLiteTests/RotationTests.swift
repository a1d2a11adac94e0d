@testable import CipherFormats
import DurableFiles
@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Testing
import TestSupport

/// One case of the old-key upgrade matrix.
struct UpgradeCase: CustomTestStringConvertible, Sendable {
    let kinds: [SourceKind]
    let oldIndex: Int
    let madeByShell: Bool
    let strategy: RotationStrategy
    var testDescription: String {
        "\(kinds.map(\.rawValue).joined(separator: ",")) made with key \(oldIndex + 1) by \(madeByShell ? "sqlcipher shell" : "library"), \(strategy)"
    }
}

let upgradeCases: [UpgradeCase] = {
    let lists: [[SourceKind]] = [
        [.passphrase, .hex, .envPassphrase],
        [.hex, .filePassphrase, .passphrase],
        [.envHex, .passphrase, .fileHex],
        [.fileHex, .envPassphrase, .hex],
        [.filePassphrase, .envHex, .passphrase],
    ]
    return lists.enumerated().flatMap { listIndex, kinds in
        [0, 1].flatMap { old in
            RotationStrategy.allCases.map { UpgradeCase(kinds: kinds, oldIndex: old, madeByShell: (listIndex + old) % 2 == 0, strategy: $0) }
        }
    }
}()

@Suite("Rotation to the current key", .ownThread)
struct RotationTests {
    @Test("a file on an older key opens, ends up on the current key only, with everything intact", arguments: upgradeCases)
    func upgrade(_ scenario: UpgradeCase) throws {
        let directory = TemporaryDirectory("upgrade")
        let ring = TestKeyring(scenario.kinds, in: directory)
        let path = directory.file("app.sqlite")
        let old = ring.keys[scenario.oldIndex]
        if scenario.madeByShell {
            try Fixture.createWithShell(at: path, key: old.shellKey)
        } else {
            try Fixture.createWithLibrary(at: path, keys: ring.only(scenario.oldIndex, database: path))
        }
        let before = try Fixture.digest(of: path, with: ring.only(scenario.oldIndex, database: path))

        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: OpenOptions(rotationStrategy: scenario.strategy))
        let report = database.report
        #expect(report.openedWithKeyID == old.id)
        #expect(report.rotated)
        #expect(report.rotation?.method == (scenario.strategy == .automatic ? .pageReencryption : .inPlace))
        #expect(report.rotation?.toKeyID == "k3")
        // Current key first, then the older keys from the newest, down to the one that opened it.
        #expect(report.attempts.map(\.keyID) == ["k3"] + ring.keys[scenario.oldIndex...1].reversed().map(\.id))
        #expect(report.attempts.map(\.opened) == Array(repeating: false, count: 2 - scenario.oldIndex) + [true])
        #expect(try database.read { try Fixture.contentDigest($0) } == before)
        // The handed-out connection works on the new key: triggers fire, views read.
        try database.write { db in try db.execute("UPDATE people SET score = score + 1 WHERE id = 1") }
        #expect(try database.read { try $0.queryValue("SELECT count(*) FROM audit", as: Int.self) } == 21)
        #expect(try database.read { try $0.queryValue("SELECT count(*) FROM high_scores", as: Int.self) } ?? 0 > 0)

        // The independent shell: the current key opens it and it is intact; older keys do not.
        #expect(try SQLCipherShell.opens(path, with: ring.keys[2].shellKey))
        for older in ring.keys.dropLast() {
            #expect(try !SQLCipherShell.opens(path, with: older.shellKey), "key \(older.id) still opens the file")
        }
        let shell = try SQLCipherShell.run(path, key: ring.keys[2].shellKey, "PRAGMA user_version; PRAGMA application_id; SELECT count(*) FROM people; SELECT name FROM sqlite_master WHERE type IN ('index','trigger','view') ORDER BY name;")
        #expect(shell.stdout.split(separator: "\n") == ["42", "1234567", "200", "high_scores", "people_audit", "people_name"])
    }

    @Test("a second open of a rotated file tries one key and does not rotate")
    func secondOpen() throws {
        let directory = TemporaryDirectory("second")
        let ring = TestKeyring([.passphrase, .passphrase], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey)
        _ = try EncryptedDatabase(path: path, keys: ring.keyList(database: path))
        let again = try EncryptedDatabase(path: path, keys: ring.keyList(database: path))
        #expect(again.report.attempts.map(\.keyID) == ["k2"])
        #expect(!again.report.rotated)
        #expect(again.report.isOnCurrentKey)
    }

    @Test("a WAL-mode file made by the shell rotates and stays in WAL mode", arguments: RotationStrategy.allCases)
    func walMode(strategy: RotationStrategy) throws {
        let directory = TemporaryDirectory("wal")
        let ring = TestKeyring([.hex, .passphrase], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey, rows: 2000, walMode: true)
        let before = try Fixture.digest(of: path, with: ring.only(0, database: path))
        do {
            let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: OpenOptions(rotationStrategy: strategy))
            #expect(database.report.rotation?.journalMode == "wal")
            #expect(database.report.rotation?.method == (strategy == .automatic ? .pageReencryption : .inPlace))
            #expect(try database.read { try $0.journalMode() } == "wal")
            #expect(try database.read { try Fixture.contentDigest($0) } == before)
        }
        #expect(try SQLCipherShell.opens(path, with: ring.keys[1].shellKey))
        #expect(try !SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
    }

    @Test("with automatic rotation off the file stays on its key until rotateToCurrentKey()")
    func explicitRotation() throws {
        let directory = TemporaryDirectory("explicit")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey)
        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: OpenOptions(rotateToCurrentKey: false))
        #expect(!database.report.rotated)
        #expect(try SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
        let rotation = try #require(try database.rotateToCurrentKey())
        #expect(rotation.fromKeyID == "k1" && rotation.toKeyID == "k2")
        #expect(database.report.rotated)
        #expect(try database.rotateToCurrentKey() == nil)
        #expect(try database.read { try $0.queryValue("SELECT count(*) FROM people", as: Int.self) } == 200)
        #expect(try SQLCipherShell.opens(path, with: ring.keys[1].shellKey))
        #expect(try !SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
    }

    @Test("every verification level accepts a good rotation and reports its timings", arguments: RotationStrategy.allCases)
    func verificationLevels(strategy: RotationStrategy) throws {
        for level in RotationVerification.allCases {
            let directory = TemporaryDirectory("verify")
            let ring = TestKeyring([.hex, .hex], in: directory)
            let path = directory.file("app.sqlite")
            try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey)
            let rotation = try #require(try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: OpenOptions(verification: level, rotationStrategy: strategy)).report.rotation)
            #expect(rotation.verification == level)
            #expect(rotation.rekeyDuration > .zero && rotation.totalDuration >= rotation.rekeyDuration + rotation.verifyDuration)
            #expect(rotation.bytes == Int64(FileSystem.size(of: path) ?? -1))
        }
    }

    @Test("opening read-only a file on an older key reports that it needs rotation and changes nothing")
    func readOnlyNeedsRotation() throws {
        let directory = TemporaryDirectory("readonly")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey)
        let snapshot = FileSnapshot(path)
        #expect(throws: EncryptedDatabaseError.rotationNeeded(path: path, openedWith: "k1", currentKeyID: "k2")) {
            _ = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: OpenOptions(readOnly: true))
        }
        let check = try EncryptedDatabase.check(path: path, keys: ring.keyList(database: path))
        #expect(check.needsRotation && check.openedWithKeyID == "k1")
        #expect(FileSnapshot(path) == snapshot)
    }

    @Test("a lock held by another connection makes rotation fail as busy, with the file untouched and still on its key")
    func busyDuringRotation() throws {
        let directory = TemporaryDirectory("busyrotate")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey)
        let reader = try EncryptedDatabase(path: path, keys: ring.only(0, database: path))
        let snapshot = FileSnapshot(path)
        try reader.writeWithoutTransaction { db in
            try db.execute("BEGIN")
            _ = try db.queryValue("SELECT count(*) FROM people", as: Int.self)  // holds a SHARED lock
            #expect {
                _ = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: OpenOptions(busyTimeout: .milliseconds(200)))
            } throws: { error in
                (error as? EncryptedDatabaseError)?.category == .busy
            }
            try db.execute("COMMIT")
        }
        #expect(FileSnapshot(path) == snapshot)
        #expect(try SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
        #expect(try EncryptedDatabase(path: path, keys: ring.keyList(database: path)).report.rotated)
    }

    @Test("verification catches a rekey that changed nothing, and proves the old key still opens the file")
    func verificationCatchesNoOp() throws {
        let directory = TemporaryDirectory("noop")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey)
        let keys = try ring.keyList(database: path)
        let context = RotationContext(path: path, from: keys.keys[0], to: keys.keys[1], busyTimeout: .seconds(1), verification: .quickCheck,
                                      logger: OpenOptions().logger, files: .system, workers: 1)
        let before = try Fixture.digest(of: path, with: ring.only(0, database: path))
        let snapshot = FileSnapshot(path)
        #expect(throws: EncryptedDatabaseError.rotationNotApplied(path: path, fromKeyID: "k1", toKeyID: "k2",
                                                                   detail: "SQLCipher reported success but the file is still on the old key (test)")) {
            _ = try EngineRekey().verify(in: context, detail: "test")
        }
        // The old key still opens the file, every page of it, with the same rows; the new key does not.
        #expect(FileSnapshot(path) == snapshot)
        #expect(try SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
        #expect(try !SQLCipherShell.opens(path, with: ring.keys[1].shellKey))
        let old = try EncryptedDatabase(path: path, keys: ring.only(0, database: path))
        #expect(try old.read { try $0.queryValue("PRAGMA quick_check", as: String.self) } == "ok")
        #expect(try old.read { try Fixture.contentDigest($0) } == before)
    }
}

@Suite("Engine facts the design relies on (SQLCipher 3.4.1, real library)", .ownThread)
struct EngineFactTests {
    @Test("sqlite3_rekey on a read-only handle returns OK and changes nothing: why every rotation is verified")
    func rekeyOnReadOnlyHandleLies() throws {
        let directory = TemporaryDirectory("fact")
        let ring = TestKeyring([.hex, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey)
        let snapshot = FileSnapshot(path)
        let keys = try ring.keyList(database: path)
        let connection = try Connection(path: path, access: .readOnly, key: keys.keys[0].cipherKey, busyTimeout: .seconds(1))
        try connection.verifyReadable()
        let outcome = connection.rekey(to: keys.keys[1].cipherKey!)
        connection.close()
        #expect(outcome.reportedSuccess)
        #expect(FileSnapshot(path) == snapshot)
        #expect(try SQLCipherShell.opens(path, with: ring.keys[0].shellKey))
    }

    @Test("a raw key given as bytes to sqlite3_key is not the x'…' key: the library always passes the text form")
    func rawKeyForm() throws {
        let directory = TemporaryDirectory("fact")
        let ring = TestKeyring([.hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[0].shellKey)
        let keys = try ring.keyList(database: path)
        let connection = try Connection(path: path, access: .readOnly, key: keys.keys[0].cipherKey, busyTimeout: .seconds(1))
        try connection.verifyReadable()
        keys.keys[0].material!.withSQLCipherBytes { bytes in
            #expect(bytes.count == 67 && bytes.first == UInt8(ascii: "x") && bytes[1] == UInt8(ascii: "'") && bytes.last == UInt8(ascii: "'"))
        }
    }
}
