@testable import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// Finding the key of a file costs one attempt (one key derivation, for a passphrase) per key
/// tried: the current key first, then the older keys from the newest. A file `k` keys behind
/// costs `k + 1` attempts, whatever the length of the list; an up-to-date file costs one.
@Suite("Key trial order: a file k keys behind costs k + 1 attempts")
struct KeyTrialOrderTests {
    /// How many keys behind the current one the file is, in a list of 20 passphrases.
    static let behind = [0, 1, 2, 5, 19]

    @Test("a list of 20 passphrases: a file made by the shell k keys behind the current key opens after exactly k + 1 attempts, newest first",
          arguments: behind)
    func attemptsFollowDistance(_ k: Int) throws {
        let directory = TemporaryDirectory("trial-order")
        let ring = TestKeyring(Array(repeating: .passphrase, count: 20), in: directory)
        let path = directory.file("app.sqlite")
        let fileKey = ring.keys[19 - k]
        try Fixture.createWithShell(at: path, key: fileKey.shellKey, rows: 20)

        let stopwatch = ContinuousClock.now
        let database = try EncryptedDatabase(path: path, keys: ring.keyList(database: path), options: OpenOptions(rotateToCurrentKey: false))
        let elapsed = ContinuousClock.now - stopwatch
        let attempts = database.report.attempts
        print("trial-order|\(k) behind|\(attempts.count) attempts|\(elapsed)")
        #expect(attempts.count == k + 1, "a file \(k) keys behind took \(attempts.count) attempts")
        // The current key, then each older key from the newest down to the file's.
        #expect(attempts.map(\.keyID) == ring.keys[(19 - k)...].reversed().map(\.id))
        #expect(attempts.map(\.opened) == Array(repeating: false, count: k) + [true])
        #expect(database.report.openedWithKeyID == fileKey.id)
        #expect(try database.read { try $0.queryValue("SELECT count(*) FROM people", as: Int.self) } == 20)
    }

    @Test("the trial order is the current key, then the older keys from the newest (every list length up to 20)")
    func orderForEveryLength() throws {
        let directory = TemporaryDirectory("trial-order-lists")
        for count in 1...20 {
            let ring = TestKeyring(Array(repeating: .hex, count: count), in: directory)
            let list = try ring.keyList(database: directory.file("app.sqlite"))
            #expect(list.trialOrder.map(\.id) == ring.keys.reversed().map(\.id), "\(count) keys")
        }
    }
}
