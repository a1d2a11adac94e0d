import CipherFormats
import EncryptedSQLite
import Foundation
import Testing
import TestSupport

extension BadInputCase: CustomTestStringConvertible {}

/// What one bad input gave, for the checks every case gets.
struct MatrixOutcome {
    /// The error thrown (`nil` when the operation wrongly succeeded).
    var error: (any Error)?
    /// Strings the message must contain: the database path, the Keys file, the key id…
    var mustName: [String]
    /// Files that must be exactly as before (bytes, and the names in their folder).
    var unchanged: [(path: String, before: FileSnapshot)]
    /// Why the case could not run here (a missing optional tool), when it could not.
    var skipped: String?

    static func skip(_ reason: String) -> MatrixOutcome {
        MatrixOutcome(error: nil, mustName: [], unchanged: [], skipped: reason)
    }
}

typealias MatrixContext = BadInputContext

extension BadInputContext {
    var keysPath: String { directory.file("Keys") }

    func keyList(_ path: String? = nil) throws -> KeyList { try ring.keyList(database: path ?? db) }

    /// A Keys file for `app.sqlite` with two good marker keys and `extra` key entries (6-space indented).
    @discardableResult
    func writeKeys(_ extra: String, goodKeysFirst: Bool = true) -> String {
        let good = """
                  - id: good-pass
                    passphrase: "\(passphrase("good"))"
                  - id: good-hex
                    hex: \(hex())

            """
        let text = "databases:\n  - path: app.sqlite\n    keys:\n" + (goodKeysFirst ? good + extra : extra + good)
        write(text)
        return text
    }

    /// Loads the Keys file, builds the list for `app.sqlite` and opens it: the first error.
    func loadAndOpen(environment: [String: String] = [:], asNobody: Bool = false) -> (any Error)? {
        let keysPath = keysPath, db = db
        let work: @Sendable () -> (any Error)? = {
            do {
                let file = try KeysFile.load(path: keysPath)
                let keys = try file.keyList(forDatabase: db, environment: environment)
                _ = try EncryptedDatabase(path: db, keys: keys)
                return nil
            } catch {
                return error
            }
        }
        if asNobody { return (try? OtherUser.run(work)) ?? nil }
        return work()
    }

    /// Opens `path` with the ring's keys: the error, if any.
    func open(_ path: String? = nil, options: OpenOptions = OpenOptions(), migrator: DatabaseMigrator? = nil) -> (any Error)? {
        do {
            _ = try EncryptedDatabase(path: path ?? db, keys: keyList(path), options: options, migrator: migrator)
            return nil
        } catch {
            return error
        }
    }

    /// The standard Keys-file case: a database on the first good key, the Keys file, the first error.
    func keysCase(_ extra: String, goodKeysFirst: Bool = true, environment: [String: String] = [:], mustName: [String]) throws -> MatrixOutcome {
        writeKeys(extra, goodKeysFirst: goodKeysFirst)
        return try keysCase(environment: environment, mustName: mustName)
    }

    /// The Keys file is written already.
    func keysCase(environment: [String: String] = [:], asNobody: Bool = false, mustName: [String]) throws -> MatrixOutcome {
        try makeDatabase(key: 1)
        let before = (FileSnapshot(db), FileSnapshot(keysPath))
        let error = loadAndOpen(environment: environment, asNobody: asNobody)
        return MatrixOutcome(error: error, mustName: mustName, unchanged: [(db, before.0), (keysPath, before.1)])
    }

    /// The Keys file is written already and must not be read by the test (a named pipe, a device).
    func keysCaseWithoutKeysSnapshot(mustName: [String]) throws -> MatrixOutcome {
        try makeDatabase(key: 1)
        let before = FileSnapshot(db)
        let error = loadAndOpen()
        return MatrixOutcome(error: error, mustName: mustName, unchanged: [(db, before)])
    }

    /// The standard database case: `make`, then open with the ring's keys.
    func databaseCase(options: OpenOptions = OpenOptions(), asNobody: Bool = false, _ make: () throws -> Void) throws -> MatrixOutcome {
        try make()
        let before = FileSnapshot(db)
        let error: (any Error)?
        if asNobody {
            let db = db, keys = try keyList()
            error = try OtherUser.run { () -> (any Error)? in
                do { _ = try EncryptedDatabase(path: db, keys: keys, options: options); return nil } catch { return error }
            }
        } else {
            error = open(options: options)
        }
        return MatrixOutcome(error: error, mustName: [db], unchanged: [(db, before)])
    }

    static func randomBytes(_ count: Int) -> Data { Data((0..<count).map { _ in UInt8.random(in: 0...255) }) }

    /// A database created with the SQL migrations `applied`, then opened with a migrator of `then`: the error.
    func migrationCase(applied: [(String, String)], then: [(String, String)], mustName: String) throws -> MatrixOutcome {
        func migrator(_ migrations: [(String, String)]) throws -> DatabaseMigrator {
            var migrator = DatabaseMigrator()
            for (identifier, sql) in migrations { try migrator.registerSQLMigration(identifier, sql: sql) }
            return migrator
        }
        _ = try EncryptedDatabase(path: db, keys: keyList(), options: OpenOptions(createIfMissing: true), migrator: migrator(applied))
        let before = FileSnapshot(db)
        return MatrixOutcome(error: open(migrator: try migrator(then)), mustName: [db, mustName], unchanged: [(db, before)])
    }

    /// Registers the migrations of a folder holding one file `name` with `content`: the error.
    func migrationFolderCase(file name: String, content: Data, mustName: [String]? = nil) throws -> MatrixOutcome {
        try makeDatabase(key: 2)
        let folder = directory.file("Migrations")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        _ = FileManager.default.createFile(atPath: folder + "/" + name, contents: content)
        let before = FileSnapshot(db)
        var migrator = DatabaseMigrator()
        let error = Result { () throws(MigrationError) in try migrator.registerSQLMigrations(in: folder) }.error
        return MatrixOutcome(error: error, mustName: mustName ?? [folder + "/" + name], unchanged: [(db, before)])
    }
}

/// The library and Keys-file cases of ``BadInputCatalog``, by id (the key-encryption cases are in
/// `BadInputKeyEncryptionCases.swift`).
let matrixCases = coreMatrixCases.merging(keyEncryptionMatrixCases) { first, _ in first }

let coreMatrixCases: [String: @Sendable (MatrixContext) throws -> MatrixOutcome] = [
    // MARK: The database file
    "db.missing": { c in try c.databaseCase {} },
    "db.missingFolder": { c in
        let nested = c.directory.file("absent/app.sqlite")
        let before = FileSnapshot(c.directory.file("app.sqlite"))
        let error = c.open(nested, options: OpenOptions(createIfMissing: true))
        return MatrixOutcome(error: error, mustName: [nested], unchanged: [(nested, FileSnapshot(nested)), (c.db, before)])
    },
    "db.directory": { c in try c.databaseCase { try FileManager.default.createDirectory(atPath: c.db, withIntermediateDirectories: false) } },
    "db.fifo": { c in try c.databaseCase { _ = mkfifo(c.db, 0o600) } },
    "db.empty": { c in try c.databaseCase { _ = FileManager.default.createFile(atPath: c.db, contents: Data()) } },
    "db.truncated": { c in try c.databaseCase { _ = FileManager.default.createFile(atPath: c.db, contents: MatrixContext.randomBytes(100)) } },
    "db.firstPageOnly": { c in
        try c.databaseCase {
            let full = c.directory.file("full.sqlite")
            try Fixture.createWithShell(at: full, key: .passphrase(c.passphrase("stranger")), rows: 50)
            _ = FileManager.default.createFile(atPath: c.db, contents: try Data(contentsOf: URL(fileURLWithPath: full)).prefix(1024))
            try FileManager.default.removeItem(atPath: full)
        }
    },
    "db.randomBytes": { c in try c.databaseCase { _ = FileManager.default.createFile(atPath: c.db, contents: MatrixContext.randomBytes(8192)) } },
    "db.unknownKey": { c in try c.databaseCase { try Fixture.createWithShell(at: c.db, key: .passphrase(c.passphrase("stranger")), rows: 5) } },
    // A SQLCipher 2 file on each engine (SQLCipher 4's shell needs the compatibility pragma; 3.4.1's ignores it).
    "db.legacyUnmarked": { c in try c.databaseCase { try c.makeDatabase(key: 0, settings: "PRAGMA cipher_compatibility = 2;\nPRAGMA kdf_iter = 4000;\n") } },
    // 2 KiB pages: the default format of neither engine (1 KiB on SQLCipher 3, 4 KiB on SQLCipher 4).
    "db.otherSettings": { c in try c.databaseCase { try c.makeDatabase(key: 1, settings: "PRAGMA cipher_page_size = 2048;\n") } },
    "db.sqlcipher4": { c in
        guard SQLCipher4.interopTestsRun else { return .skip(SQLCipher4.unavailableReason ?? "SQLCipher 4 is not available") }
        guard SQLCipherEngine.linked.major < 4 else { return .skip("the linked SQLCipher 4 reads files in its own format (FileFormatTests)") }
        return try c.databaseCase {
            _ = try SQLCipher4.execute(c.db, key: c.ring.keys[1].shellKey, compatibility3: false, ["CREATE TABLE t(a)", "INSERT INTO t VALUES (1)"])
        }
    },
    "db.plaintext": { c in
        try c.databaseCase {
            let result = try SQLiteShell.run(c.db, "CREATE TABLE t(a); INSERT INTO t VALUES ('plain');")
            guard result.status == 0 else { throw FixtureError(message: result.stderr) }
        }
    },
    "db.unreadable": { c in
        guard OtherUser.isAvailable else { return .skip("needs root to act as another user") }
        return try c.databaseCase(asNobody: true) {
            try c.makeDatabase(key: 2)
            chmod(c.db, 0o600)
        }
    },
    "db.readOnlyFile": { c in
        guard OtherUser.isAvailable else { return .skip("needs root to act as another user") }
        return try c.databaseCase(asNobody: true) {
            try c.makeDatabase(key: 0)
            chmod(c.db, 0o644)
        }
    },
    "db.readOnlyOpen": { c in try c.databaseCase(options: OpenOptions(readOnly: true)) { try c.makeDatabase(key: 0) } },
    "db.locked": { c in
        try c.makeDatabase(key: 2)
        let before = FileSnapshot(c.db)
        let holder = try ShellHolder.exclusiveLock(on: c.db, key: c.ring.keys[2].shellKey)
        let error = c.open(options: OpenOptions(busyTimeout: .milliseconds(200)))
        holder.release()
        return MatrixOutcome(error: error, mustName: [c.db], unchanged: [(c.db, before)])
    },
    "db.walOpenElsewhere": { c in
        try SQLiteShell.createFixture(at: c.db, rows: 20, walMode: true)
        let before = FileSnapshot(c.db)
        guard let sqlite3 = SQLiteShell.path else { throw FixtureError(message: "the sqlite3 shell is not installed") }
        let holder = try ShellHolder(shell: sqlite3, database: c.db, key: nil, sql: "SELECT count(*) FROM people;")
        let keys = try KeyList(database: c.db, keys: [.plaintext(id: "v1")] + c.ring.keys.map(\.key), environment: c.ring.environment)
        var error: (any Error)?
        do { _ = try EncryptedDatabase(path: c.db, keys: keys, options: OpenOptions(busyTimeout: .milliseconds(200))) } catch let caught { error = caught }
        holder.release()
        return MatrixOutcome(error: error, mustName: [c.db], unchanged: [(c.db, before)])
    },
    "db.diskFull": { c in
        // A file on an old key in a tmpfs with room for the file but not for a journal as large.
        switch try c.databaseOnNearlyFullDisk(key: 0) {
        case .failure(let reason): return .skip(reason.message)
        case .success(let path):
            let before = FileSnapshot(path)
            return MatrixOutcome(error: c.open(path), mustName: [path], unchanged: [(path, before)])
        }
    },
    "db.noInode": { c in
        // Space for the journal, but no inode to create it: the page re-encryption cannot create
        // its journal and stops before writing anything.
        try noInodeCase(c, strategy: .automatic, mustName: { [$0] })
    },
    "db.noInodeEngineRekey": { c in
        // The engine's rekey cannot create its journal either, returns OK and changes nothing;
        // the verification catches it.
        try noInodeCase(c, strategy: .engineRekey, mustName: { [$0, "k1", "k3"] })
    },
    "db.createDiskFull": { c in
        switch SmallFilesystem.mount(size: 64 * 1024) {
        case .failure(let reason): return .skip(reason.message)
        case .success(let disk):
            c.disks.append(disk)
            disk.fill()
            let path = disk.file("app.sqlite")
            let before = FileSnapshot(path)
            let error = c.open(path, options: OpenOptions(createIfMissing: true))
            return MatrixOutcome(error: error, mustName: [path], unchanged: [(path, before)])
        }
    },

    // MARK: Migrations
    "mig.edited": { c in
        try c.migrationCase(applied: [("0001_notes", "CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT);")],
                            then: [("0001_notes", "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT);")], mustName: "0001_notes")
    },
    "mig.newer": { c in
        try c.migrationCase(applied: [("0001_notes", "CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT);"), ("0002_tags", "CREATE TABLE tags(name TEXT);")],
                            then: [("0001_notes", "CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT);")], mustName: "0002_tags")
    },
    "mig.failing": { c in
        try c.migrationCase(applied: [("0001_notes", "CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT);")],
                            then: [("0001_notes", "CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT);"), ("0002_broken", "INSERT INTO no_such_table VALUES (1);")],
                            mustName: "0002_broken")
    },
    "mig.fileName": { c in try c.migrationFolderCase(file: "create_users.sql", content: Data("CREATE TABLE users(id);".utf8)) },
    "mig.notUTF8": { c in try c.migrationFolderCase(file: "0001_users.sql", content: Data([0x43, 0x52, 0xFF, 0xFE, 0x00, 0xC3])) },
    "mig.emptyUp": { c in try c.migrationFolderCase(file: "0001_users.sql", content: Data("-- down\nDROP TABLE users;\n".utf8), mustName: ["0001_users"]) },

    // MARK: The Keys file
    "keys.missing": { c in try c.keysCase(mustName: [c.keysPath]) },
    "keys.directory": { c in
        try FileManager.default.createDirectory(atPath: c.keysPath, withIntermediateDirectories: false)
        return try c.keysCase(mustName: [c.keysPath])
    },
    "keys.unreadable": { c in
        guard OtherUser.isAvailable else { return .skip("needs root to act as another user") }
        c.writeKeys("")
        chmod(c.keysPath, 0o600)
        return try c.keysCase(asNobody: true, mustName: [c.keysPath])
    },
    "keys.empty": { c in
        c.write("")
        return try c.keysCase(mustName: [c.keysPath])
    },
    "keys.notYAML": { c in
        c.write("databases: [\n  - path: app.sqlite\n    keys: [ {id: k, passphrase: \"\(c.passphrase("unclosed"))\" ")
        return try c.keysCase(mustName: [c.keysPath])
    },
    "keys.notUTF8": { c in
        let text = "databases:\n  - path: app.sqlite\n    keys:\n      - id: k\n        passphrase: \"\(c.passphrase("latin1"))"
        _ = FileManager.default.createFile(atPath: c.keysPath, contents: Data(text.utf8) + Data([0xFF, 0xFE, 0x22, 0x0A]), attributes: [.posixPermissions: 0o600])
        return try c.keysCase(mustName: [c.keysPath])
    },
    "keys.wrongShape": { c in
        c.write("- \"\(c.passphrase("list"))\"\n- databases\n")
        return try c.keysCase(mustName: [c.keysPath])
    },
    "keys.duplicateField": { c in
        try c.keysCase("      - id: twice\n        passphrase: \"\(c.passphrase("one"))\"\n        passphrase: \"\(c.passphrase("two"))\"\n", mustName: [c.keysPath])
    },
    "keys.emptyList": { c in
        c.write("databases:\n  - path: other.sqlite\n    keys:\n      - id: k\n        passphrase: \"\(c.passphrase("other"))\"\n  - path: app.sqlite\n    keys: []\n")
        return try c.keysCase(mustName: [c.db])
    },
    "keys.emptyID": { c in try c.keysCase("      - id: \"\"\n        passphrase: \"\(c.passphrase("noid"))\"\n", mustName: [c.db, "key 3"]) },
    "keys.duplicateID": { c in try c.keysCase("      - id: good-pass\n        passphrase: \"\(c.passphrase("dup"))\"\n", mustName: [c.db, "good-pass"]) },
    "keys.twoSources": { c in
        try c.keysCase("      - id: both\n        passphrase: \"\(c.passphrase("both"))\"\n        env: SOME_VARIABLE\n", mustName: [c.keysPath, "both"])
    },
    "keys.noSource": { c in try c.keysCase("      - id: nothing\n", mustName: [c.keysPath, "nothing"]) },
    "keys.unknownField": { c in try c.keysCase("      - id: typo\n        passprase: \"\(c.passphrase("typo"))\"\n", mustName: [c.keysPath, "passprase"]) },
    "keys.secretAsField": { c in try c.keysCase("      - {id: glued, passphrase:\(c.hex())}\n", mustName: [c.keysPath]) },
    "keys.hexLength": { c in try c.keysCase("      - id: short\n        hex: \(c.secret(String(c.hex().dropLast())))\n", mustName: [c.db, "short"]) },
    "keys.hexDigits": { c in try c.keysCase("      - id: nothex\n        hex: \(c.secret(String(c.hex().dropLast(3)) + "xyz"))\n", mustName: [c.db, "nothex"]) },
    "keys.emptyPassphrase": { c in try c.keysCase("      - id: blank\n        passphrase: \"\"\n", mustName: [c.db, "blank"]) },
    "keys.nulPassphrase": { c in
        let secret = c.passphrase("nul")
        return try c.keysCase("      - id: nul\n        passphrase: \"\(secret.prefix(20))\\0\(secret.dropFirst(20))\"\n", mustName: [c.db, "nul"])
    },
    "keys.envUnset": { c in try c.keysCase("      - id: fromenv\n        env: MATRIX_UNSET_VARIABLE_7Q\n", mustName: [c.db, "fromenv", "MATRIX_UNSET_VARIABLE_7Q"]) },
    "keys.envEmpty": { c in
        try c.keysCase("      - id: emptyenv\n        env: MATRIX_EMPTY\n", environment: ["MATRIX_EMPTY": ""], mustName: [c.db, "emptyenv", "MATRIX_EMPTY"])
    },
    "keys.envHoldsKey": { c in try c.keysCase("      - id: pasted\n        env: \(c.hex())\n", mustName: [c.keysPath, "pasted"]) },
    "keys.keyFileMissing": { c in
        try c.keysCase("      - id: fromfile\n        file: absent.key\n", mustName: [c.db, "fromfile", c.directory.file("absent.key")])
    },
    "keys.keyFileGroup": { c in
        let path = TestKeys.writeKeyFile(c.passphrase("group"), in: c.directory, name: "group.key", mode: 0o640)
        return try c.keysCase("      - id: groupkey\n        file: group.key\n", mustName: [c.db, "groupkey", path])
    },
    "keys.keyFileWorld": { c in
        let path = TestKeys.writeKeyFile(c.passphrase("world"), in: c.directory, name: "world.key", mode: 0o644)
        return try c.keysCase("      - id: worldkey\n        file: world.key\n", mustName: [c.db, "worldkey", path])
    },
    "keys.keyFileDirectory": { c in
        try FileManager.default.createDirectory(atPath: c.directory.file("keys.d"), withIntermediateDirectories: false)
        return try c.keysCase("      - id: dirkey\n        file: keys.d\n", mustName: [c.db, "dirkey", c.directory.file("keys.d")])
    },
    "keys.keyFileHuge": { c in
        let path = TestKeys.writeKeyFile(String(repeating: c.passphrase("huge") + "\n", count: 2000), in: c.directory, name: "huge.key")
        return try c.keysCase("      - id: hugekey\n        file: huge.key\n", mustName: [c.db, "hugekey", path])
    },
    "keys.keysFIFO": { c in
        #expect(mkfifo(c.keysPath, 0o600) == 0)
        return try c.keysCaseWithoutKeysSnapshot(mustName: [c.keysPath])
    },
    "keys.keysDevice": { c in
        #expect(symlink("/dev/zero", c.keysPath) == 0)
        return try c.keysCaseWithoutKeysSnapshot(mustName: [c.keysPath])
    },
    "keys.keysHuge": { c in
        // Just over KeysFile.maximumSize (64 MiB).
        c.write("databases:\n" + String(repeating: "# filler line of a Keys file that has grown far too large\n", count: KeysFile.maximumSize / 58 + 1))
        return try c.keysCase(mustName: [c.keysPath])
    },
    "keys.keysReadable": { c in
        c.writeKeys("")
        chmod(c.keysPath, 0o644)
        return try c.keysCase(mustName: [c.keysPath])
    },
    "keys.keysWritable": { c in
        c.writeKeys("")
        chmod(c.keysPath, 0o666)
        return try c.keysCase(mustName: [c.keysPath])
    },
    "keys.keysOwner": { c in
        guard OtherUser.isAvailable else { return .skip("needs root to give the file to another user") }
        _ = TestKeys.writeKeyFile(c.passphrase("owned"), in: c.directory, name: "own.key")
        c.write("databases:\n  - path: app.sqlite\n    keys:\n      - id: owned\n        file: own.key\n")
        chmod(c.keysPath, 0o644)
        chown(c.keysPath, 4321, 4321)
        return try c.keysCase(mustName: [c.keysPath, "chown \(geteuid())"])
    },
    "keys.keyFileFIFO": { c in
        #expect(mkfifo(c.directory.file("pipe.key"), 0o600) == 0)
        return try c.keysCase("      - id: pipekey\n        file: pipe.key\n", mustName: [c.db, "pipekey", c.directory.file("pipe.key"), "named pipe"])
    },
    "keys.keyFileOwner": { c in
        guard OtherUser.isAvailable else { return .skip("needs root to give the file to another user") }
        let path = TestKeys.writeKeyFile(c.passphrase("theirs"), in: c.directory, name: "theirs.key")
        chown(path, 4321, 4321)
        return try c.keysCase("      - id: theirkey\n        file: theirs.key\n", mustName: [c.db, "theirkey", path])
    },
    "keys.keyFileFolder": { c in
        let folder = c.directory.file("shared")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        chmod(folder, 0o777)
        let path = TestKeys.writeKeyFile(c.passphrase("shared"), in: c.directory, name: "shared/k.key")
        return try c.keysCase("      - id: sharedkey\n        file: shared/k.key\n", mustName: [c.db, "sharedkey", path, "chmod go-w \(folder)"])
    },
    "keys.tag": { c in
        try c.keysCase("      - id: tagged\n        passphrase: !!binary \(c.secret(Data(c.passphrase("tag").utf8).base64EncodedString()))\n", mustName: [c.keysPath, "line 9"])
    },
    "keys.blockScalar": { c in
        try c.keysCase("      - id: block\n        passphrase: |\n          \(c.passphrase("block"))\n", mustName: [c.keysPath, "line 9"])
    },
    "keys.passphraseTooLong": { c in
        try c.keysCase("      - id: long\n        passphrase: \"\(c.secret(String(repeating: c.passphrase("long"), count: 30)))\"\n", mustName: [c.db, "long"])
    },
    "keys.wordAsField": { c in
        try c.keysCase("      - id: word\n        \(c.secret("correcthorsebatterystaple")): 1\n", mustName: [c.keysPath])
    },
    "keys.envNotUpperCase": { c in
        try c.keysCase("      - id: wordenv\n        env: \(c.secret("correcthorsebatterystaple"))\n", mustName: [c.db, "wordenv"])
    },
    "keys.binarySize": { c in
        let bytes = c.secret(String(c.passphrase("binary").prefix(31)))
        _ = TestKeys.writeKeyFile(bytes, in: c.directory, name: "short.bin")
        return try c.keysCase("      - id: binkey\n        file: short.bin\n        format: binary\n", mustName: [c.db, "binkey"])
    },
    "keys.formatOnPassphrase": { c in
        try c.keysCase("      - id: fmt\n        passphrase: \"\(c.passphrase("fmt"))\"\n        format: hex\n", mustName: [c.keysPath, "fmt"])
    },
    "keys.unknownFormat": { c in try c.keysCase("      - id: pem\n        env: SOME_VARIABLE\n        format: pem\n", mustName: [c.keysPath]) },
    "keys.binaryEnv": { c in try c.keysCase("      - id: binenv\n        env: SOME_VARIABLE\n        format: binary\n", mustName: [c.keysPath, "binenv"]) },
    "keys.sameMaterial": { c in
        let secret = c.passphrase("same")
        return try c.keysCase("      - id: first\n        passphrase: \"\(secret)\"\n      - id: second\n        passphrase: \"\(secret)\"\n", mustName: [c.db, "first", "second"])
    },
    "keys.plaintextNotFirst": { c in try c.keysCase("      - id: plain\n        plaintext: true\n", mustName: [c.db, "plain"]) },
    "keys.plaintextAlone": { c in
        c.write("databases:\n  - path: app.sqlite\n    keys:\n      - id: plain\n        plaintext: true\n  - path: other.sqlite\n    keys:\n      - id: k\n        hex: \(c.hex())\n")
        return try c.keysCase(mustName: [c.db, "plain"])
    },
    "keys.pageSize": { c in
        try c.keysCase("      - id: pages\n        hex: \(c.hex())\n        cipher: {page_size: 1000}\n", mustName: [c.db, "pages"])
    },
    "keys.cipherGeneration": { c in
        try c.keysCase("      - id: gen\n        hex: \(c.hex())\n        cipher: sqlcipher5\n", mustName: [c.keysPath])
    },
    "keys.hmacAlgorithm": { c in
        try c.keysCase("      - id: mac\n        hex: \(c.hex())\n        cipher: {hmac_algorithm: md5}\n", mustName: [c.keysPath])
    },
    "keys.kdfIterHuge": { c in
        try c.keysCase("      - id: slow\n        passphrase: \"\(c.passphrase("slow"))\"\n        cipher: {kdf_iter: 3000000000}\n", goodKeysFirst: false, mustName: [c.db, "slow"])
    },
    "keys.outOfOrder": { c in
        // The file is on the newer key: accepted, this list would rotate it back to the older one.
        c.write("databases:\n  - path: app.sqlite\n    keys:\n      - id: newer\n        hex: \(c.ring.keys[1].secret)\n        created: 2025-06-01\n      - id: older\n        passphrase: \"\(c.ring.keys[0].secret)\"\n        created: 2024-01-01\n")
        return try c.keysCase(mustName: [c.db, "newer", "older"])
    },
    "keys.createdNotDate": { c in try c.keysCase("      - id: dated\n        hex: \(c.hex())\n        created: 2025-13-01\n", mustName: [c.keysPath, "dated"]) },
    "keys.emptyPath": { c in
        c.write("databases:\n  - path: \"\"\n    keys:\n      - id: k\n        passphrase: \"\(c.passphrase("nopath"))\"\n")
        return try c.keysCase(mustName: [c.keysPath])
    },
    "keys.notListed": { c in
        c.write("databases:\n  - path: other.sqlite\n    keys:\n      - id: k\n        passphrase: \"\(c.passphrase("other"))\"\n")
        return try c.keysCase(mustName: [c.db, c.keysPath])
    },
]

extension Result {
    var error: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

/// Checks one outcome against its catalog case: the error kind, the names, the advice, no key
/// material, and no change on disk.
func checkMatrixOutcome(_ outcome: MatrixOutcome, against item: BadInputCase, secrets: [String], sourceLocation: SourceLocation = #_sourceLocation) {
    guard let error = outcome.error else {
        Issue.record("\(item.id): \(item.input) did not fail", sourceLocation: sourceLocation)
        return
    }
    #expect(ErrorKind.name(of: error) == item.error, "\(item.id): \(error)", sourceLocation: sourceLocation)
    let messages = [String(describing: error), error.localizedDescription, String(reflecting: error)]
    for name in outcome.mustName {
        #expect(messages[0].contains(name), "\(item.id): the message does not name \(name): \(messages[0])", sourceLocation: sourceLocation)
    }
    #expect(messages[0].contains(item.advice), "\(item.id): the message does not say \"\(item.advice)\": \(messages[0])", sourceLocation: sourceLocation)
    #expect(messages[1] == messages[0], "\(item.id): localizedDescription differs from description", sourceLocation: sourceLocation)
    var dumped = ""
    dump(error, to: &dumped)
    for text in messages + [dumped] {
        let leaks = SecretScan.leaks(of: secrets, in: text)
        #expect(leaks.isEmpty && !text.contains("MARKER"), "\(item.id): key material in the message: \(text)", sourceLocation: sourceLocation)
    }
    for (path, before) in outcome.unchanged {
        #expect(FileSnapshot(path) == before, "\(item.id): \(path) or its folder changed (before: \(before.folderListing), after: \(FileSnapshot(path).folderListing))", sourceLocation: sourceLocation)
    }
}

@Suite("Bad-input matrix: library and Keys file", .ownThread)
struct BadInputMatrixTests {
    @Test("each bad input: its own error kind, a message naming the file or key id with advice, no key material, nothing changed on disk",
          arguments: BadInputCatalog.cases(in: .library) + BadInputCatalog.cases(in: .keys))
    func badInput(_ item: BadInputCase) throws {
        let implementation = try #require(matrixCases[item.id], "no implementation for \(item.id)")
        let context = MatrixContext("matrix")
        let outcome = try implementation(context)
        if let reason = outcome.skipped {
            print("bad-input case \(item.id) skipped: \(reason)")
            return
        }
        checkMatrixOutcome(outcome, against: item, secrets: context.secrets)
    }

    @Test("every library and Keys-file case of the catalog has an implementation, and every implementation a case")
    func complete() {
        let catalog = Set((BadInputCatalog.cases(in: .library) + BadInputCatalog.cases(in: .keys)).map(\.id))
        #expect(catalog == Set(matrixCases.keys))
        #expect(Set(BadInputCatalog.cases.map(\.id)).count == BadInputCatalog.cases.count, "duplicate ids in the catalog")
    }

    @Test("unusual but valid passphrases (quotes, backslashes, non-ASCII, emoji, spaces) are used byte for byte, as the sqlcipher shell uses them")
    func unusualPassphrases() throws {
        let directory = TemporaryDirectory("unusual")
        let passphrases = [
            "it's a \"quoted\" pass'; DROP TABLE x; --",
            "back\\slash \\x41 \\' end",
            "ünïcödé NFC é",
            "unicode NFD e\u{301}",
            "emoji 🔑🗝️ and RTL \u{202E}txet",
            "  leading and trailing spaces  ",
        ]
        for (index, text) in passphrases.enumerated() {
            let secret = "MARKER-\(index)-" + text
            TestSecrets.register(secret)
            let path = directory.file("db\(index).sqlite")
            try Fixture.createWithShell(at: path, key: .passphrase(secret), rows: 5)
            let escaped = secret.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            let hex = TestKeys.hex()
            _ = FileManager.default.createFile(atPath: directory.file("Keys"), contents: Data("""
                databases:
                  - path: db\(index).sqlite
                    keys:
                      - id: old
                        passphrase: "\(escaped)"
                      - id: new
                        hex: \(hex)
                """.utf8), attributes: [.posixPermissions: 0o600])
            let keys = try KeysFile.load(path: directory.file("Keys")).keyList(forDatabase: path, environment: [:])
            let database = try EncryptedDatabase(path: path, keys: keys)
            #expect(database.report.openedWithKeyID == "old" && database.report.rotated, "passphrase \(index)")
            #expect(try SQLCipherShell.opens(path, with: .hex(hex)), "passphrase \(index)")
        }
    }
}

/// A rotation on a tmpfs with room but no free inode (for the journal), with `strategy`.
private func noInodeCase(_ c: BadInputContext, strategy: RotationStrategy, mustName: (String) -> [String]) throws -> MatrixOutcome {
    let source = c.directory.file("source.sqlite")
    try c.makeDatabase(at: source, key: 0, rows: 50)
    switch SmallFilesystem.mount(size: 4 << 20, inodes: 2) {
    case .failure(let reason): return .skip(reason.message)
    case .success(let disk):
        c.disks.append(disk)
        let path = disk.file("app.sqlite")
        try TestFiles.copy(source, to: path)
        let before = FileSnapshot(path)
        let error = c.open(path, options: OpenOptions(rotationStrategy: strategy))
        return MatrixOutcome(error: error, mustName: mustName(path), unchanged: [(path, before)])
    }
}
