/// Facts about this build of the EncryptedSQLite package: its version.
///
/// ``version`` is the newest release listed in the repository's `CHANGELOG.md`; until the first
/// release it is a pre-release of it, `0.1.0-dev`. A build from the main branch between two
/// releases reports the newer one only once it is released; what it adds is in the CHANGELOG's
/// "Unreleased" section. `rekey --version` prints it.
///
/// ```swift
/// import EncryptedSQLite
///
/// print("EncryptedSQLite \(EncryptedSQLitePackage.version)")   // EncryptedSQLite 0.1.0-dev
/// ```
public enum EncryptedSQLitePackage {
    /// The version of this build, as semantic-versioning text, such as `0.1.0-dev` or `1.2.0`.
    public static let version = "0.1.0-dev"
}
