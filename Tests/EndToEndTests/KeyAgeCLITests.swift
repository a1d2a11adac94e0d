import EncryptedSQLite
import Foundation
import Testing
import TestSupport

@Suite("rekey: key age policy and health in status and --check", .ownThread)
struct KeyAgeCLITests {
    func folder(maximumDays: Int, created: String, databaseOnOldKey: Bool) throws -> TemporaryDirectory {
        let directory = TemporaryDirectory("keyage")
        let (old, new) = (TestKeys.hex(), TestKeys.hex())
        let keys = """
            databases:
              - path: app.sqlite
                max_key_age_days: \(maximumDays)   # a new key at least once a year
                keys:
                  - id: old
                    hex: \(old)
                    created: 2019-06-01
                  - id: current
                    hex: \(new)
                    created: \(created)

            """
        _ = FileManager.default.createFile(atPath: directory.file("Keys"), contents: Data(keys.utf8), attributes: [.posixPermissions: 0o600])
        try Fixture.createWithShell(at: directory.file("app.sqlite"), key: .hex(databaseOnOldKey ? old : new), rows: 20)
        return directory
    }

    @Test("a current key older than max_key_age_days: status and --check exit 4 and say so; needing rotation (3) wins; within the policy exits 0")
    func keyAge() throws {
        let stale = try folder(maximumDays: 365, created: "2020-01-01", databaseOnOldKey: false)
        let status = try RekeyCLI.run(["status", "--all"], in: stale)
        #expect(status.status == 4, "\(status.stderr)")
        #expect(status.stderr.contains("current key \"current\" created 2020-01-01 is") && status.stderr.contains("over its maximum of 365 days"))
        let check = try RekeyCLI.run(["--check", "--all"], in: stale)
        #expect(check.status == 4, "\(check.stderr)")
        let json = try RekeyCLI.run(["status", "--all", "--json", "--health"], in: stale)
        #expect(json.status == 4)
        let document = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let ages = try #require(document["keyAges"] as? [[String: Any]])
        #expect(ages.first?["tooOld"] as? Bool == true && ages.first?["maximumDays"] as? Int == 365)
        let health = try #require(document["health"] as? [[String: Any]])
        #expect(health.first?["integrity"] as? String == "ok" && health.first?["keyID"] as? String == "current")

        let staleAndOld = try folder(maximumDays: 365, created: "2020-01-01", databaseOnOldKey: true)
        #expect(try RekeyCLI.run(["--check", "--all"], in: staleAndOld).status == 3, "needing rotation wins over an old key")

        let fresh = try folder(maximumDays: 100_000, created: "2020-01-01", databaseOnOldKey: false)
        let fine = try RekeyCLI.run(["status", "--all", "--health"], in: fresh)
        #expect(fine.status == 0, "\(fine.stderr)")
        let format = SQLCipherEngine.linked.major >= 4 ? "kdf_iter 256000 (sha512), page_size 4096, hmac sha512" : "kdf_iter 64000 (sha1), page_size 1024, hmac sha1"
        #expect(fine.stdout.contains("health: key \"current\" (current), \(format), journal delete"), "\(fine.stdout)")
        #expect(fine.stdout.contains("pages ok"))
        #expect(try RekeyCLI.run(["--check", "--all"], in: fresh).status == 0)
    }

    @Test("max_key_age_days must be a whole number of days, at least 1")
    func invalidPolicy() throws {
        let directory = try folder(maximumDays: 0, created: "2020-01-01", databaseOnOldKey: false)
        let result = try RekeyCLI.run(["status", "--all"], in: directory)
        #expect(result.status == 78)
        #expect(result.stderr.contains("max_key_age_days"))
    }
}
