import EncryptedSQLite
import Foundation

/// Test key material. Each test makes its own; none of it is ever a real key.
public enum TestKeys {
    /// A random passphrase with a recognizable marker, to search outputs for.
    public static func passphrase(_ label: String = "pass") -> String {
        let secret = "MARKER-\(label)-\(UUID().uuidString) 'quoted' ünï"
        TestSecrets.register(secret)
        return secret
    }

    /// 64 random hex digits.
    public static func hex() -> String {
        let secret = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        TestSecrets.register(secret)
        return secret
    }

    /// Writes a key file with mode 0600 and returns its path.
    public static func writeKeyFile(_ contents: String, in directory: TemporaryDirectory, name: String = "key-\(UUID().uuidString.prefix(6))", mode: mode_t = 0o600) -> String {
        let path = directory.file(name)
        _ = FileManager.default.createFile(atPath: path, contents: Data(contents.utf8))
        chmod(path, mode)
        return path
    }
}
