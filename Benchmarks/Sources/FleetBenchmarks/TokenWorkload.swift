import EncryptedSQLite
import Foundation

/// Part c: data keys wrapped by an AES key that stays in a PKCS#11 token (SoftHSM2): the cost of
/// an unwrap on the token, and of an open whose data key is unwrapped there.
///
/// The token is made here (its own folder and `SOFTHSM2_CONF`, set before the module is loaded)
/// with SoftHSM2's tools, as the Keys File guide shows; its PIN is a throwaway of this run.
struct TokenWorkload {
    let folder: String
    let options: FleetOptions
    let report: ResultsTable

    static let module = "/usr/lib/softhsm/libsofthsm2.so"

    func run() throws {
        guard FileManager.default.fileExists(atPath: Self.module) else {
            say("  part c skipped: SoftHSM2 is not installed (\(Self.module)); scripts/setup.sh installs it")
            return
        }
        let pin = FleetFixture.hex(FleetFixture.randomBytes(8))
        try makeToken(pin: pin)
        let reference = PKCS11KeyReference(module: Self.module, tokenLabel: "fleet", keyLabel: "fleet-kek", pin: .environment("FLEET_HSM_PIN"))
        var kek: PKCS11KeyEncryptionKey?
        let login = try seconds { kek = try PKCS11KeyEncryptionKey(id: "hsm", reference: reference, environment: ["FLEET_HSM_PIN": pin]) }
        guard let kek else { return }
        let databases = folder + "/token"
        try FileManager.default.createDirectory(atPath: databases, withIntermediateDirectories: true)
        var values: [[UInt8]] = []
        var wraps: [Double] = []
        for index in 0..<options.tokenOpens {
            let dataKey = DataKey.random()
            try FleetFixture.makeDatabase(at: databases + "/db-\(index).sqlite", key: FleetFixture.rawKeyText(dataKey))
            let context = KeyWrappingContext(dataKeyID: "data-1", keyEncryptionKeyID: kek.id)
            wraps.append(try seconds { values.append(try kek.wrap(dataKey, context: context)) })
        }
        let context = KeyWrappingContext(dataKeyID: "data-1", keyEncryptionKeyID: kek.id)
        let unwraps = try values.map { value in try seconds { _ = try kek.unwrap(value, context: context) } }
        let opens = try values.enumerated().map { index, value in
            try seconds {
                // A new list each time, so that its unwrap cache does not answer: one token unwrap per open.
                let path = databases + "/db-\(index).sqlite"
                let keys = try KeyList(database: path, keys: [DatabaseKey(id: "data-1", source: .wrapped(WrappedDataKey(bytes: value, wrappedBy: kek.id)))],
                                       keyEncryptionKeys: KeyEncryptionKeyList([kek]))
                try OpenWorkload.openAndRead(path, keys: keys)
            }
        }
        let count = options.tokenOpens
        report.add(ResultRow(part: "c", name: "SoftHSM2: load the module, find the token, log in, find the key", value: login * 1000, unit: "ms", note: "once per process"))
        report.add(ResultRow(part: "c", name: "SoftHSM2: wrap a data key on the token (C_Encrypt AES-GCM), median", value: median(wraps) * 1000, unit: "ms", note: "\(count) wraps"))
        report.add(ResultRow(part: "c", name: "SoftHSM2: unwrap a data key on the token (C_Decrypt AES-GCM), median", value: median(unwraps) * 1000, unit: "ms", note: "\(count) unwraps"))
        report.add(ResultRow(part: "c", name: "open with a data key unwrapped on the token, median", value: median(opens) * 1000, unit: "ms", note: "\(count) opens"))
    }

    /// A token `fleet` with an AES-256 key `fleet-kek` made on it, in a folder of this run.
    private func makeToken(pin: String) throws {
        let tokens = folder + "/softhsm/tokens"
        try FileManager.default.createDirectory(atPath: tokens, withIntermediateDirectories: true)
        let configuration = folder + "/softhsm/softhsm2.conf"
        try "directories.tokendir = \(tokens)\nobjectstore.backend = file\nlog.level = ERROR\n".write(toFile: configuration, atomically: true, encoding: .utf8)
        setenv("SOFTHSM2_CONF", configuration, 1)
        try Self.run("softhsm2-util", ["--init-token", "--free", "--label", "fleet", "--so-pin", pin + "-so", "--pin", pin])
        try Self.run("pkcs11-tool", ["--module", Self.module, "--token-label", "fleet", "--login", "--pin", pin,
                                     "--keygen", "--key-type", "AES:32", "--label", "fleet-kek"])
    }

    private static func run(_ tool: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [tool] + arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw FleetFixture.Failure(description: "\(tool) failed (\(process.terminationStatus)); is SoftHSM2 (softhsm2, opensc) installed?") }
    }
}
