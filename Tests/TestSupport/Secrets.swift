import Foundation

/// Every secret the test helpers made in this process (marker passphrases, hex keys), so that the
/// helpers can refuse to put one on a command line and the secrets tests can search outputs for
/// all of them.
public enum TestSecrets {
    private static let registry = Registry()

    /// Remembers `secret` (called by ``TestKeys``).
    public static func register(_ secret: String) {
        registry.add(secret)
    }

    /// Every registered secret.
    public static var all: [String] { registry.values }

    /// The first registered secret found in `texts`, in any of the forms it could be printed in
    /// (see ``SecretScan/forms(of:)``).
    public static func firstLeak(in texts: [String]) -> String? {
        let forms = registry.lowercasedForms
        for text in texts.map({ $0.lowercased() }) {
            if let found = forms.first(where: { entry in entry.forms.contains { text.contains($0) } }) { return found.secret }
        }
        return nil
    }

    private final class Registry: @unchecked Sendable {
        private let lock = NSLock()
        // Invariant: only touched with `lock` held.
        private var secrets: [String: [String]] = [:]

        func add(_ secret: String) {
            lock.withLock {
                if secrets[secret] == nil { secrets[secret] = SecretScan.forms(of: secret).map { $0.lowercased() } }
            }
        }

        var values: [String] { lock.withLock { Array(secrets.keys) } }
        var lowercasedForms: [(secret: String, forms: [String])] { lock.withLock { secrets.map { ($0.key, $0.value) } } }
    }
}

/// Searches text for key material in every form it could take when printed: as given, in the
/// other letter case (hex keys), and as the hex digits of its UTF-8 bytes (how SQLite renders a
/// bound blob, e.g. in `sqlite3_expanded_sql`).
public enum SecretScan {
    /// The forms `secret` could appear in.
    public static func forms(of secret: String) -> [String] {
        var forms = [secret, secret.lowercased(), secret.uppercased()]
        // A distinctive part is enough: printing half of a key is a leak too.
        if secret.count >= 32 {
            forms.append(String(secret.prefix(secret.count / 2)))
            forms.append(String(secret.suffix(secret.count / 2)))
        }
        let digits = Array("0123456789abcdef")
        let hex = String(secret.utf8.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] })
        forms += [hex, hex.uppercased()]
        return Array(Set(forms)).filter { $0.count >= 8 }
    }

    /// The secrets of `secrets` that appear in `text` in any of their forms.
    public static func leaks(of secrets: [String], in text: String) -> [String] {
        let lowered = text.lowercased()
        return secrets.filter { secret in
            forms(of: secret).contains { form in text.contains(form) || lowered.contains(form.lowercased()) }
        }
    }

    /// Same as ``leaks(of:in:)`` over raw bytes (a file's content), comparing bytes exactly.
    public static func leaks(of secrets: [String], in bytes: Data) -> [String] {
        secrets.filter { secret in
            forms(of: secret).contains { form in bytes.range(of: Data(form.utf8)) != nil }
        }
    }
}

/// A child process would have received key material in its argument list (visible to every user
/// in `ps` and `/proc/<pid>/cmdline`).
public struct SecretInArgumentsError: Error, CustomStringConvertible {
    /// The executable that was about to run.
    public let executable: String
    /// What went wrong (never the secret).
    public var description: String { "a test helper tried to pass key material in the arguments of \(executable); pass keys on standard input" }
}
