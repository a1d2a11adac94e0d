import Foundation
import KeyConfiguration

/// SoftHSM2 tokens for this test process: one token folder, with every token and key the PKCS#11
/// tests use, made by SoftHSM2's own tools before the module is first loaded here.
///
/// A PKCS#11 module is loaded and initialized once per process and reads its configuration
/// (`SOFTHSM2_CONF`) then, so the folder is made once for the whole process and the variable set
/// before any test loads the module. Tokens are separate where login state matters: PKCS#11 logs
/// a whole process in to a token, so the wrong-PIN token is one no other test logs in to.
public enum SoftHSMToken {
    /// Debian's path of the module (package softhsm2).
    public static let module = "/usr/lib/softhsm/libsofthsm2.so"
    /// The user PIN of every test token (test material only).
    public static let pin = "pkcs11-test-pin-4711"
    /// A PIN no token has.
    public static let wrongPIN = "pkcs11-wrong-pin-0815"
    /// The variable the tests' key references read the PIN from.
    public static let pinVariable = "ESQ_TEST_HSM_PIN"

    /// The token most tests use: AES-256 keys `kek-a` and `kek-b` made on the token, `imported`
    /// (AES-256 from ``importedKey``, to compare with ``LocalKeyEncryptionKey``) and `generic` (a
    /// generic secret, which AES-GCM refuses).
    public static let mainToken = "esq-main"
    /// A token no test logs in to with the right PIN.
    public static let pinToken = "esq-pin"
    /// The bytes of the `imported` key.
    public static let importedKey: [UInt8] = (0..<32).map { UInt8(($0 * 37 + 11) & 0xFF) }

    /// `true` when the module and both tools are installed.
    public static var isInstalled: Bool {
        FileManager.default.fileExists(atPath: module) && ProcessRunner.which("softhsm2-util") != nil
            && ProcessRunner.which("pkcs11-tool") != nil
    }

    /// Whether the PKCS#11 tests run: always under CI (where a missing SoftHSM2 fails them), else
    /// when it is installed.
    public static var testsEnabled: Bool { isInstalled || ProcessInfo.processInfo.environment["CI"] == "true" }

    /// Why the tokens could not be made.
    public struct SetupFailed: Error, CustomStringConvertible {
        public let description: String
    }

    /// The configuration file's path, after the tokens were made and `SOFTHSM2_CONF` set in this
    /// process.
    /// - Throws: ``SetupFailed`` when SoftHSM2 is missing or a tool fails.
    public static func configuration() throws -> String {
        try prepared.get()
    }

    /// The environment of a child process (`rekey`) that uses the tokens: this process's, with
    /// the PIN variable and `SOFTHSM2_CONF` naming a copy of the tokens of its own, made from
    /// their state before any login.
    ///
    /// SoftHSM2 rewrites a token's file at every login (its PIN-count flags), so processes that
    /// log in to the same token folder at once can read it half written: a child's login then
    /// failed with CKR_GENERAL_ERROR in a CI run. A real token has no such file; each child
    /// having its own copy (the same keys) keeps the tests about the library, not SoftHSM2.
    public static func childEnvironment(pin: String = pin) throws -> [String: String] {
        _ = try configuration()
        let own = folder + "/child-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: own, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: pristine, toPath: own + "/tokens")
        let configuration = own + "/softhsm2.conf"
        try settings(tokens: own + "/tokens").write(toFile: configuration, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["SOFTHSM2_CONF"] = configuration
        environment[pinVariable] = pin
        return environment
    }

    /// A reference to key `key` on `token`, its PIN from ``pinVariable``.
    public static func reference(token: String = mainToken, key: String = "kek-a", module: String = module) -> PKCS11KeyReference {
        PKCS11KeyReference(module: module, tokenLabel: token, keyLabel: key, pin: .environment(pinVariable))
    }

    private static let folder = NSTemporaryDirectory() + "encryptedsqlite-softhsm-\(getpid())"
    /// The tokens as made, before any process logged in: what each child's copy starts from.
    private static let pristine = folder + "/pristine"

    private static func settings(tokens: String) -> String {
        "directories.tokendir = \(tokens)\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n"
    }

    private static let prepared: Result<String, SetupFailed> = Result(catching: {
        guard isInstalled else {
            throw SetupFailed(description: "SoftHSM2 is not installed (\(module), softhsm2-util, pkcs11-tool); run scripts/setup.sh, which installs softhsm2 and opensc")
        }
        try? FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: folder + "/tokens", withIntermediateDirectories: true)
        let configuration = folder + "/softhsm2.conf"
        try settings(tokens: folder + "/tokens").write(toFile: configuration, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["SOFTHSM2_CONF"] = configuration
        func run(_ tool: String, _ arguments: [String]) throws {
            let result = try ProcessRunner.run(ProcessRunner.which(tool) ?? tool, arguments, environment: environment)
            guard result.status == 0 else {
                throw SetupFailed(description: "\(tool) \(arguments.first ?? "") failed (\(result.status)): \(result.stderr)\(result.stdout)")
            }
        }
        func tool(_ token: String, _ arguments: [String]) throws {
            try run("pkcs11-tool", ["--module", module, "--token-label", token, "--login", "--pin", pin] + arguments)
        }
        for token in [mainToken, pinToken] {
            try run("softhsm2-util", ["--init-token", "--free", "--label", token, "--so-pin", "so-pin-4711", "--pin", pin])
        }
        try tool(mainToken, ["--keygen", "--key-type", "AES:32", "--label", "kek-a"])
        try tool(mainToken, ["--keygen", "--key-type", "AES:32", "--label", "kek-b"])
        try tool(mainToken, ["--keygen", "--key-type", "GENERIC:32", "--label", "generic"])
        try tool(pinToken, ["--keygen", "--key-type", "AES:32", "--label", "kek-a"])
        let keyFile = folder + "/imported.key"
        try Data(importedKey).write(to: URL(fileURLWithPath: keyFile))
        try tool(mainToken, ["--write-object", keyFile, "--type", "secrkey", "--key-type", "AES:32", "--label", "imported"])
        try FileManager.default.removeItem(atPath: keyFile)
        // pkcs11-tool's logins above wrote the token files; nothing uses them until this returns.
        try FileManager.default.copyItem(atPath: folder + "/tokens", toPath: pristine)
        setenv("SOFTHSM2_CONF", configuration, 1)
        atexit { try? FileManager.default.removeItem(atPath: SoftHSMToken.folder) }
        return configuration
    }).mapError { $0 as? SetupFailed ?? SetupFailed(description: "\($0)") }
}
