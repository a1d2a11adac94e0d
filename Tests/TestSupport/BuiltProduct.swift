import Foundation

/// Executables of this package, built next to the test bundle by `swift build --build-tests`.
public enum BuiltProduct {
    /// The path of the executable product `name` (override with the environment variable
    /// `<NAME>_BINARY`, e.g. `REKEY_BINARY`).
    public static func path(_ name: String) -> String {
        let variable = name.uppercased().replacingOccurrences(of: "-", with: "_") + "_BINARY"
        if let override = ProcessInfo.processInfo.environment[variable] { return override }
        let bundle = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return bundle.deletingLastPathComponent().appendingPathComponent(name).path
    }

    /// The `crash-harness` executable (the `rekey` one is ``RekeyCLI/path``).
    public static let crashHarness = path("crash-harness")
}
