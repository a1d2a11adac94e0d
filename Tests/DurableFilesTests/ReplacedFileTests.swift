import DurableFiles
import Foundation
import Testing
import TestSupport

/// The descriptor of a file replaced by a background rotation's swap, closed after the swap: its
/// blocks are freed in steps, and the zeroed start that makes a late opener find no database stays.
@Suite("ReplacedFile: the replaced file is freed in steps after the swap")
struct ReplacedFileTests {
    /// A 3 MiB file of non-zero bytes at `path`.
    private static func makeFile(_ path: String) throws {
        try Data(repeating: 0xA5, count: 3 << 20).write(to: URL(fileURLWithPath: path))
    }

    @Test("after the first page was zeroed: cut down to that page, which stays zeros")
    func shrinksToTheZeroedStart() throws {
        let directory = TemporaryDirectory("replaced-file")
        let path = directory.file("old.sqlite")
        try Self.makeFile(path)
        guard case .held(let lease) = SoleUseLease.acquire(path) else {
            Issue.record("no lease on a file nobody else has open")
            return
        }
        try lease.overwriteStart(bytes: 4096)
        lease.releaseKeepingOpen().shrinkAndClose(step: 1 << 20, pause: 0)
        let data = try #require(TestFiles.contents(path))
        #expect(data == Data(repeating: 0, count: 4096))
    }

    @Test("when the first page was not zeroed: only closed, the file left as it is")
    func onlyClosesWithoutAZeroedStart() throws {
        let directory = TemporaryDirectory("replaced-file-kept")
        let path = directory.file("old.sqlite")
        try Self.makeFile(path)
        guard case .held(let lease) = SoleUseLease.acquire(path) else {
            Issue.record("no lease on a file nobody else has open")
            return
        }
        lease.releaseKeepingOpen().shrinkAndClose(step: 1 << 20, pause: 0)
        let data = try #require(TestFiles.contents(path))
        #expect(data == Data(repeating: 0xA5, count: 3 << 20))
        // The descriptor is closed: the lease (and its descriptor) can be taken again.
        guard case .held(let again) = SoleUseLease.acquire(path) else {
            Issue.record("the replaced file's descriptor was left open")
            return
        }
        again.release()
    }
}

/// The locks a background rotation's swap keeps on the replaced file, seen by an independent
/// SQLite in another process: while they are held, it cannot take the file's EXCLUSIVE lock (so a
/// late opener can neither roll a journal into it nor close as the last connection of a WAL).
@Suite("SoleUseLease.lock: SQLite's SHARED and RESERVED locks on a replaced file")
struct ReplacedFileLockTests {
    @Test("the sqlcipher shell cannot lock the file exclusively while the locks are held, and can after close()")
    func locksSeenBySQLite() throws {
        let directory = TemporaryDirectory("replaced-file-locks")
        let path = directory.file("app.sqlite")
        let key = ShellKey.hex(TestKeys.hex())
        try Fixture.createWithShell(at: path, key: key, rows: 10)
        guard case .held(let lease) = SoleUseLease.acquire(path) else {
            Issue.record("no lease on a file nobody else has open")
            return
        }
        try lease.lock(start: 0x4000_0002, length: 510, exclusive: false)
        try lease.lock(start: 0x4000_0001, length: 1, exclusive: true)
        let replaced = lease.releaseKeepingOpen()
        let locked = try SQLCipherShell.run(path, key: key, "PRAGMA busy_timeout = 0; BEGIN EXCLUSIVE; COMMIT;")
        #expect(locked.status != 0 && locked.stderr.contains("locked"), "expected 'database is locked', got status \(locked.status): \(locked.stderr)")
        replaced.close()
        let free = try SQLCipherShell.run(path, key: key, "PRAGMA busy_timeout = 0; BEGIN EXCLUSIVE; COMMIT;")
        #expect(free.status == 0, "\(free.stderr)")
    }
}
