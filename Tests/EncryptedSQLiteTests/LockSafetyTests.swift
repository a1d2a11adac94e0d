import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// SQLite's locks are POSIX `fcntl` locks, owned by the process: closing any descriptor of a
/// database file drops every lock the process holds on it. The library must never do that while
/// connections to the file are open (it reads headers and salts through SQLite's file layer).
@Suite("The library never drops its own connections' locks", .ownThread)
struct LockSafetyTests {
    @Test("opening, checking and inspecting a file again while a WAL connection to it is open leaves that connection's lock in place: another process cannot take the file")
    func reopeningKeepsLocks() throws {
        let directory = TemporaryDirectory("locks")
        let ring = TestKeyring([.passphrase, .hex], in: directory)
        let path = directory.file("app.sqlite")
        try Fixture.createWithShell(at: path, key: ring.keys[1].shellKey, walMode: true)
        let keys = try ring.keyList(database: path)

        // A connection in WAL mode: it holds a shared lock on the file while it is open.
        let first = try EncryptedDatabase(path: path, keys: keys)
        #expect(try first.read { try $0.queryValue("SELECT count(*) FROM people", as: Int.self) } == 200)
        #expect(try Self.otherProcessCanTakeTheFile(path, key: ring.keys[1].shellKey) == false, "precondition: the lock is held")

        // Everything that reads the file's header, salt or first page while that connection lives.
        _ = try EncryptedDatabase(path: path, keys: keys)
        _ = try EncryptedDatabase.check(path: path, keys: keys)
        _ = DatabaseFileKind.inspect(path: path)
        _ = try DatabaseInspection.state(path: path, keys: keys)
        let stranger = try KeyList(database: path, keys: [DatabaseKey(id: "stranger", source: .passphrase(TestKeys.passphrase("stranger")))])
        #expect(throws: EncryptedDatabaseError.self) { _ = try EncryptedDatabase(path: path, keys: stranger) }  // runs the SQLCipher 4 diagnosis

        // Leaving WAL mode needs the file to itself: with the first connection's lock intact,
        // another process must be refused.
        #expect(try Self.otherProcessCanTakeTheFile(path, key: ring.keys[1].shellKey) == false,
                "the first connection's shared lock was dropped: another process could delete the WAL under it")
        #expect(try first.read { try $0.journalMode() } == "wal")
        withExtendedLifetime(first) {}
    }

    /// `true` when the `sqlcipher` shell, in another process, can switch the file out of WAL
    /// mode, which SQLite allows only when no other connection holds a lock on it.
    static func otherProcessCanTakeTheFile(_ path: String, key: ShellKey) throws -> Bool {
        let result = try SQLCipherShell.run(path, key: key, "PRAGMA journal_mode = DELETE;")
        let mode = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        if mode == "delete" {
            // Put it back so that the caller's connection keeps working as before.
            _ = try SQLCipherShell.run(path, key: key, "PRAGMA journal_mode = WAL;")
            return true
        }
        return false
    }
}
