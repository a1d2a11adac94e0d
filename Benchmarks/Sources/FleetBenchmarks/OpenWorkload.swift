import EncryptedSQLite
import Foundation

/// Part b: opening many databases in one process. Wrapped data keys: one KEK derivation (PBKDF2
/// once), then per file an AES-GCM unwrap and a raw-key open (no key derivation). Passphrases:
/// one PBKDF2 per file (each file has its own salt, and each open its own key list, as a process
/// opening tenant databases one after another does).
struct OpenWorkload {
    let folder: String
    let options: FleetOptions
    let report: ResultsTable

    func run() throws {
        let count = options.opens
        let wrappedFolder = folder + "/open-wrapped", passphraseFolder = folder + "/open-passphrase"
        for path in [wrappedFolder, passphraseFolder] { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
        let kek = FleetFixture.PassphraseKEK(id: "kek-open")
        let setupKEK = KeyEncryptionKeyList([try kek.derivedOutsideTheLibrary()])
        var wrapped: [WrappedDataKey] = []
        var rawKeys: [String] = []
        for index in 0..<count {
            let dataKey = DataKey.random()
            rawKeys.append(FleetFixture.rawKeyText(dataKey))
            try FleetFixture.makeDatabase(at: wrappedFolder + "/db-\(index).sqlite", key: rawKeys[index])
            wrapped.append(try setupKEK.wrap(dataKey, dataKeyID: "data-1"))
        }
        // Each passphrase file is made by the engine with its own random salt (one PBKDF2 each).
        let passphrases = (0..<options.passphraseOpenCount).map { _ in "tenant " + FleetFixture.hex(FleetFixture.randomBytes(12)) }
        let made = try seconds {
            for (index, passphrase) in passphrases.enumerated() {
                try FleetFixture.makeDatabase(at: passphraseFolder + "/db-\(index).sqlite", key: passphrase)
            }
        }
        say("  made \(count) raw-key and \(passphrases.count) passphrase databases (\(String(format: "%.1f", made)) s for the passphrase ones; not timed below)")

        var derive = 0.0
        var perOpen: [Double] = []
        let wrappedTotal = try seconds {
            var keks = KeyEncryptionKeyList.empty
            derive = try seconds { keks = KeyEncryptionKeyList([try RewrapWorkload.localKEK(kek)]) }
            for index in 0..<count {
                perOpen.append(try seconds {
                    let path = wrappedFolder + "/db-\(index).sqlite"
                    let keys = try KeyList(database: path, keys: [DatabaseKey(id: "data-1", source: .wrapped(wrapped[index]))], keyEncryptionKeys: keks)
                    try Self.openAndRead(path, keys: keys)
                })
            }
        }
        // The same 1,000 files again, as a restarted process opens them: their `-lock` files (the
        // step-aside protocol's, made once in a database's life by its first open) exist now. The
        // KEK's derivation is counted again, as a new process pays it.
        var secondPass: [Double] = []
        let secondTotal = try seconds {
            let keks = KeyEncryptionKeyList([try RewrapWorkload.localKEK(kek)])
            for index in 0..<count {
                secondPass.append(try seconds {
                    let path = wrappedFolder + "/db-\(index).sqlite"
                    let keys = try KeyList(database: path, keys: [DatabaseKey(id: "data-1", source: .wrapped(wrapped[index]))], keyEncryptionKeys: keks)
                    try Self.openAndRead(path, keys: keys)
                })
            }
        } + derive
        // The engine alone, for scale: the same files opened through the C API with the raw key.
        let engineOpens = try (0..<count).map { index in
            try seconds { try FleetFixture.openWithEngine(wrappedFolder + "/db-\(index).sqlite", key: rawKeys[index]) }
        }
        var passphraseOpens: [Double] = []
        for (index, passphrase) in passphrases.enumerated() {
            passphraseOpens.append(try seconds {
                let path = passphraseFolder + "/db-\(index).sqlite"
                try Self.openAndRead(path, keys: try KeyList(database: path, keys: [DatabaseKey(id: "p", source: .passphrase(KeyText(passphrase)))]))
            })
        }
        let passphraseTotal = passphraseOpens.reduce(0, +) / Double(passphraseOpens.count) * Double(count)
        let estimated = passphraseOpens.count < count
        let ratio = passphraseTotal / wrappedTotal
        let engine4 = SQLCipherEngine.linked.major >= 4
        report.add(ResultRow(part: "b", name: "open \(count) databases, wrapped data keys (1 KEK derivation)", value: wrappedTotal, unit: "s"))
        report.add(ResultRow(part: "b", name: "  of which: the KEK's PBKDF2", value: derive, unit: "s"))
        report.add(ResultRow(part: "b", name: "  per open (unwrap + raw-key open + read), median", value: median(perOpen) * 1000, unit: "ms"))
        report.add(ResultRow(part: "b", name: "  the engine alone: C API open with the raw key + read, median", value: median(engineOpens) * 1000, unit: "ms"))
        report.add(ResultRow(part: "b", name: "open \(count) databases, passphrases (1 PBKDF2 each)", value: passphraseTotal, unit: "s",
                             note: estimated ? "\(passphraseOpens.count) measured, linear estimate" : "measured"))
        report.add(ResultRow(part: "b", name: "  per open, median", value: median(passphraseOpens) * 1000, unit: "ms"))
        report.add(ResultRow(part: "b", name: "passphrase opens / wrapped opens", value: ratio, unit: "×",
                             target: "≥ 100× (SQLCipher 4)", met: engine4 ? ratio >= 100 : nil,
                             note: engine4 ? "" : "the goal is for SQLCipher 4's 256,000-round KDF"))
        let secondRatio = passphraseTotal / secondTotal
        report.add(ResultRow(part: "b", name: "open the \(count) wrapped again, lock files made (+ 1 KEK derivation)", value: secondTotal, unit: "s"))
        report.add(ResultRow(part: "b", name: "  per open, median", value: median(secondPass) * 1000, unit: "ms",
                             note: String(format: "%.2f× the engine", median(secondPass) / median(engineOpens))))
        report.add(ResultRow(part: "b", name: "passphrase opens / wrapped opens, lock files made", value: secondRatio, unit: "×",
                             target: "≥ 100×", met: secondRatio >= 100,
                             note: "passphrase files' first opens (their lock files made too) against the wrapped files' second"))
    }

    /// Opens the file (no rotation: its key is current) and reads its row count.
    static func openAndRead(_ path: String, keys: KeyList) throws {
        let database = try EncryptedDatabase(path: path, keys: keys)
        let rows = try database.read { try $0.query("SELECT count(*) AS n FROM notes").first?.get("n", as: Int.self) }
        guard rows == 1 else { throw FleetFixture.Failure(description: "\(path): \(rows.map(String.init) ?? "no") rows") }
    }
}
