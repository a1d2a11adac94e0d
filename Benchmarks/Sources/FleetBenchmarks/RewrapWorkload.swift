import EncryptedSQLite
import Foundation

/// Part a: a fleet of small databases, each with its own data key wrapped by one passphrase KEK
/// in one Keys file. A master-key rotation (every data key rewrapped to a new KEK, one durable
/// rewrite of the Keys file, no database touched) against re-encrypting the fleet (every
/// database rotated to a new data key by the library's fleet rotation, as `rekey --all` does).
struct RewrapWorkload {
    let folder: String
    let options: FleetOptions
    let report: ResultsTable

    /// Master-key rotations timed, each to a new KEK (kek-1 → kek-2 → kek-3 → kek-4); the median is reported.
    static let rotations = 3

    func run() throws {
        let count = options.databases
        try FileManager.default.createDirectory(atPath: folder + "/fleet", withIntermediateDirectories: true)
        let keysPath = folder + "/Keys"
        var kek = FleetFixture.PassphraseKEK(id: "kek-1")
        let firstKEK = kek
        let wrapping = KeyEncryptionKeyList([try Self.localKEK(kek)])
        var entries: [(path: String, keys: [FleetFixture.WrappedEntry])] = []
        var reencryptEntries: [(path: String, keys: [FleetFixture.WrappedEntry])] = []
        let made = try seconds {
            for index in 1...count {
                let path = String(format: "fleet/db-%05d.sqlite", index)
                let dataKey = DataKey.random()
                try FleetFixture.makeDatabase(at: folder + "/" + path, key: FleetFixture.rawKeyText(dataKey))
                let first = FleetFixture.WrappedEntry(id: "data-1", value: try wrapping.wrap(dataKey, dataKeyID: "data-1"))
                entries.append((path, [first]))
                if index <= options.reencryptCount {
                    let next = FleetFixture.WrappedEntry(id: "data-2", value: try wrapping.wrap(DataKey.random(), dataKeyID: "data-2"))
                    reencryptEntries.append((path, [first, next]))
                }
            }
        }
        say("  made \(count) databases and their wrapped data keys in \(String(format: "%.1f", made)) s (not timed below)")
        let text = FleetFixture.keysFileText(keyEncryptionKeys: [kek], databases: entries)
        try FleetFixture.replaceDurably(keysPath, with: text)
        let sample = [1, count / 2, count].map { String(format: "fleet/db-%05d.sqlite", max(1, $0)) }
        let sampleBefore = try sample.map { try Data(contentsOf: URL(fileURLWithPath: folder + "/" + $0)) }

        let size = text.utf8.count
        let parses = try (0..<3).map { _ in try seconds { _ = try KeysFile(yaml: text, path: keysPath, baseDirectory: folder) } }
        report.add(ResultRow(part: "a", name: "Keys file with \(count) wrapped data keys: size", value: Double(size) / 1_048_576, unit: "MiB",
                            target: "≤ 1 MiB (KeysFile.maximumSize)", met: size <= KeysFile.maximumSize,
                            note: size > KeysFile.maximumSize ? "KeysFile.load refuses it; parsed here with KeysFile(yaml:)" : ""))
        report.add(ResultRow(part: "a", name: "Keys file with \(count) wrapped data keys: parse", value: median(parses), unit: "s", note: "median of 3"))

        var phases: [[Double]] = []
        for round in 1...Self.rotations {
            let next = FleetFixture.PassphraseKEK(id: "kek-\(round + 1)")
            phases.append(try rewrap(keysPath: keysPath, from: kek, to: next))
            kek = next
        }
        let totals = phases.map { $0.reduce(0, +) }
        let names = ["read and parse the Keys file", "derive the old and the new KEK (2 PBKDF2)", "unwrap and rewrap every data key", "write the Keys file durably"]
        report.add(ResultRow(part: "a", name: "master-key rotation of \(count) data keys (rewrap)", value: median(totals), unit: "s",
                            target: "≤ 1 s", met: median(totals) <= 1, note: "median of \(Self.rotations); own loop until MasterKeyRotation lands"))
        for (index, name) in names.enumerated() {
            report.add(ResultRow(part: "a", name: "  of which: " + name, value: median(phases.map { $0[index] }), unit: "s"))
        }
        try verify(keysPath: keysPath, sample: sample, sampleBefore: sampleBefore, kek: kek)

        try reencrypt(entries: reencryptEntries, kek: firstKEK, rewrap: median(totals))
        try lookupCost(entries: entries, kek: firstKEK)
    }

    static func localKEK(_ kek: FleetFixture.PassphraseKEK) throws -> LocalKeyEncryptionKey {
        try LocalKeyEncryptionKey(id: kek.id, passphrase: KeyText(kek.passphrase), salt: kek.saltBytes)
    }

    /// One master-key rotation, `old` → `new`; the seconds of each phase.
    private func rewrap(keysPath: String, from old: FleetFixture.PassphraseKEK, to new: FleetFixture.PassphraseKEK) throws -> [Double] {
        var keysFile: KeysFile?
        let parse = try seconds {
            let text = try String(contentsOfFile: keysPath, encoding: .utf8)
            keysFile = try KeysFile(yaml: text, path: keysPath, baseDirectory: folder)
        }
        guard let keysFile else { return [] }
        var target = KeyEncryptionKeyList.empty
        let derive = try seconds {
            _ = try keysFile.keyEncryptionKeys.key(id: old.id)
            target = KeyEncryptionKeyList([try Self.localKEK(new)])
        }
        var databases: [(path: String, keys: [FleetFixture.WrappedEntry])] = []
        databases.reserveCapacity(keysFile.entries.count)
        let rewrap = try seconds {
            for entry in keysFile.entries {
                var keys: [FleetFixture.WrappedEntry] = []
                for key in entry.keys {
                    guard case .wrapped(let value) = key.source else { continue }
                    let dataKey = try keysFile.keyEncryptionKeys.unwrap(value, dataKeyID: key.id, database: entry.path)
                    keys.append(FleetFixture.WrappedEntry(id: key.id, value: try target.wrap(dataKey, dataKeyID: key.id)))
                }
                databases.append((entry.configuredPath, keys))
            }
        }
        let write = try seconds {
            // The old KEK stays listed beside the new one until it is retired; none of its values is left.
            try FleetFixture.replaceDurably(keysPath, with: FleetFixture.keysFileText(keyEncryptionKeys: [old, new], databases: databases))
        }
        return [parse, derive, rewrap, write]
    }

    /// After the rotations: the sample databases are byte-identical and open with their key
    /// unwrapped by the last KEK.
    private func verify(keysPath: String, sample: [String], sampleBefore: [Data], kek: FleetFixture.PassphraseKEK) throws {
        let keysFile = try KeysFile(yaml: try String(contentsOfFile: keysPath, encoding: .utf8), path: keysPath, baseDirectory: folder)
        for (path, before) in zip(sample, sampleBefore) {
            guard try Data(contentsOf: URL(fileURLWithPath: folder + "/" + path)) == before else {
                throw FleetFixture.Failure(description: "\(path) changed during the master-key rotation")
            }
            let keys = try keysFile.keyList(forDatabase: folder + "/" + path)
            guard case .wrapped(let value) = keysFile.entry(forDatabase: folder + "/" + path)?.keys.last?.source, value.keyEncryptionKeyID == kek.id else {
                throw FleetFixture.Failure(description: "\(path) is not wrapped by \(kek.id) after the rotation")
            }
            _ = try EncryptedDatabase(path: folder + "/" + path, keys: keys, options: OpenOptions(readOnly: true))
        }
        say("  checked: \(sample.count) sample databases byte-identical after the rotations, and they open with data keys unwrapped by \(kek.id)")
    }
}
