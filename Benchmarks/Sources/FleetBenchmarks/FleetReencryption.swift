import EncryptedSQLite
import Foundation

extension RewrapWorkload {
    /// The other way to rotate: every database (of the first `entries.count`) re-encrypted to a
    /// new data key, `data-1` → `data-2`, by the library's fleet rotation with `jobs` workers, as
    /// `rekey --all` does; its key lists come from a Keys file, as there.
    func reencrypt(entries: [(path: String, keys: [FleetFixture.WrappedEntry])], kek: FleetFixture.PassphraseKEK, rewrap: Double) throws {
        let keysPath = folder + "/Keys-reencrypt"
        let text = FleetFixture.keysFileText(keyEncryptionKeys: [kek], databases: entries)
        try FleetFixture.replaceDurably(keysPath, with: text)
        var databases: [FleetDatabase] = []
        // Each entry's key list built from the entry itself: FleetDatabase.all (rekey --all) looks
        // every path up among all entries, which is quadratic (measured on a sample below).
        let lists = try seconds {
            let keysFile = try KeysFile(yaml: text, path: keysPath, baseDirectory: folder)
            databases = try keysFile.entries.map { entry in
                FleetDatabase(path: entry.path, keys: try KeyList(database: entry.path, keys: entry.keys, keyEncryptionKeys: keysFile.keyEncryptionKeys))
            }
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

    /// The cost of the key lists `rekey --all` builds (FleetDatabase.all: each path looked up
    /// among all entries) on a Keys file of at most 1,000 of the entries, with the quadratic
    /// estimate for all of them.
    func lookupCost(entries: [(path: String, keys: [FleetFixture.WrappedEntry])], kek: FleetFixture.PassphraseKEK) throws {
        let sample = Array(entries.prefix(1_000))
        let keysPath = folder + "/Keys-lookup"
        let text = FleetFixture.keysFileText(keyEncryptionKeys: [kek], databases: sample)
        try FleetFixture.replaceDurably(keysPath, with: text)
        let keysFile = try KeysFile(yaml: text, path: keysPath, baseDirectory: folder)
        _ = try keysFile.keyEncryptionKeys.key(id: kek.id)
        var failed = 0
        let lookup = seconds { failed = FleetDatabase.all(in: keysFile).filter { if case .failure = $0.keys { true } else { false } }.count }
        guard failed == 0 else { throw FleetFixture.Failure(description: "FleetDatabase.all: \(failed) key lists failed") }
        let scale = Double(options.databases) / Double(sample.count)
        report.add(ResultRow(part: "a", name: "  rekey --all's key lists (FleetDatabase.all), \(sample.count) entries", value: lookup, unit: "s",
                             note: "quadratic lookup: ~\(String(format: "%.0f", lookup * scale * scale)) s estimated for \(options.databases)"))
    }
}
