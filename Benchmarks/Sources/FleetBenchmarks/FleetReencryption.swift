import EncryptedSQLite
import Foundation

extension RewrapWorkload {
    /// The other way to rotate: every database (of the first `entries.count`) re-encrypted to a
    /// new data key, `data-1` → `data-2`, by the library's fleet rotation with `jobs` workers, as
    /// `rekey --all` does; its key lists come from a Keys file through `FleetDatabase.all`, as there.
    func reencrypt(entries: [(path: String, keys: [FleetFixture.WrappedEntry])], kek: FleetFixture.PassphraseKEK, rewrap: Double) throws {
        let keysPath = folder + "/Keys-reencrypt"
        let text = FleetFixture.keysFileText(keyEncryptionKeys: [kek], databases: entries)
        try FleetFixture.replaceDurably(keysPath, with: text)
        var databases: [FleetDatabase] = []
        let lists = try seconds {
            databases = FleetDatabase.all(in: try KeysFile(yaml: text, path: keysPath, baseDirectory: folder))
        }
        var fleet: EncryptedSQLite.FleetReport?
        let rotation = seconds {
            fleet = FleetRotation(databases: databases, jobs: options.jobs).run()
        }
        guard let fleet, fleet.succeeded, fleet.rotated == entries.count else {
            throw FleetFixture.Failure(description: "the fleet re-encryption failed: \(fleet?.failures.first.map { "\($0.path): \($0.failure)" } ?? "no report")")
        }
        let total = lists + rotation
        let estimated = entries.count < options.databases
        let all = total / Double(entries.count) * Double(options.databases)
        let note = estimated ? "\(entries.count) measured, × \(options.databases / max(1, entries.count)) (linear)" : "measured"
        report.add(ResultRow(part: "a", name: "re-encrypt \(options.databases) databases to new data keys (jobs \(options.jobs))", value: all, unit: "s", note: note))
        report.add(ResultRow(part: "a", name: "  of which: parse, KEK PBKDF2, key lists (\(2 * entries.count) unwraps)", value: lists, unit: "s", note: estimated ? "for \(entries.count)" : ""))
        report.add(ResultRow(part: "a", name: "  per database", value: total / Double(entries.count) * 1000, unit: "ms"))
        report.add(ResultRow(part: "a", name: "re-encryption / master-key rotation", value: all / rewrap, unit: "×"))
    }
}
