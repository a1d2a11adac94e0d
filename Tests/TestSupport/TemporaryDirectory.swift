import Foundation

/// A fresh folder for one test, removed when the value goes away.
public final class TemporaryDirectory: @unchecked Sendable {
    /// The folder's absolute path.
    public let path: String

    /// Creates `/tmp/encryptedsqlite-tests/<label>-<random>` (mode 0755, so that a test can run a
    /// child process as another user inside it).
    public init(_ label: String = "test") {
        let root = NSTemporaryDirectory() + "encryptedsqlite-tests"
        try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        chmod(root, 0o755)
        path = root + "/\(label)-\(UUID().uuidString.prefix(8))"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        chmod(path, 0o755)
    }

    deinit {
        chmod(path, 0o755)
        try? FileManager.default.removeItem(atPath: path)
    }

    /// A path inside the folder.
    public func file(_ name: String) -> String { path + "/" + name }

    /// The names in the folder, sorted.
    public func listing() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }
}
