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
    /// (see ``SecretScan/forms(of:)``), letter case ignored.
    ///
    /// Every process a test starts has its arguments checked here, against every secret the run
    /// has made (thousands by its end), so the scan costs one hash lookup per byte of text
    /// whatever the number of secrets: the forms are indexed by their first 8 bytes. (A
    /// `String.contains` per form took about 40% of the test process's processor time.)
    public static func firstLeak(in texts: [String]) -> String? {
        let index = registry.index
        for text in texts {
            let bytes = Array(text.lowercased().utf8)
            guard bytes.count >= FormIndex.prefixLength else { continue }
            for start in 0...(bytes.count - FormIndex.prefixLength) {
                guard let candidates = index.forms[FormIndex.prefix(of: bytes, at: start)] else { continue }
                for candidate in candidates where start + candidate.form.count <= bytes.count
                    && bytes[start..<(start + candidate.form.count)].elementsEqual(candidate.form) {
                    return candidate.secret
                }
            }
        }
        return nil
    }

    /// The lowercased forms of every registered secret, by their first ``prefixLength`` bytes
    /// (every form has at least 8 characters: ``SecretScan/forms(of:)``).
    struct FormIndex {
        static let prefixLength = 8
        var forms: [UInt64: [(form: [UInt8], secret: String)]] = [:]

        static func prefix(of bytes: [UInt8], at start: Int) -> UInt64 {
            var value: UInt64 = 0
            for byte in bytes[start..<(start + prefixLength)] { value = value << 8 | UInt64(byte) }
            return value
        }

        mutating func add(_ secret: String) {
            for form in Set(SecretScan.forms(of: secret).map { Array($0.lowercased().utf8) }) where form.count >= Self.prefixLength {
                forms[Self.prefix(of: form, at: 0), default: []].append((form, secret))
            }
        }
    }

    private final class Registry: @unchecked Sendable {
        private let lock = NSLock()
        // Invariant: only touched with `lock` held.
        private var secrets: Set<String> = []
        private var formIndex = FormIndex()

        func add(_ secret: String) {
            lock.withLock {
                if secrets.insert(secret).inserted { formIndex.add(secret) }
            }
        }

        var values: [String] { lock.withLock { Array(secrets) } }
        var index: FormIndex { lock.withLock { formIndex } }
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
            forms(of: secret).contains { form in bytes.contains(bytes: form.utf8) }
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

extension Data {
    /// Whether `needle` occurs in these bytes: `memchr` finds each candidate first byte and
    /// `memcmp` checks the rest. Files and core dumps of tens of megabytes are scanned for every
    /// key of a test, and `range(of:)` took seconds of processor time per scan. (Glibc's `memmem`
    /// is a GNU extension Swift does not import.)
    public func contains(bytes needle: some Sequence<UInt8>) -> Bool {
        let needle = Array(needle)
        guard let first = needle.first else { return true }
        return withUnsafeBytes { haystack in
            needle.withUnsafeBytes { pattern in
                guard var cursor = haystack.baseAddress, haystack.count >= pattern.count else { return false }
                let last = haystack.baseAddress! + (haystack.count - pattern.count)
                while cursor <= last {
                    guard let found = memchr(cursor, Int32(first), last - cursor + 1) else { return false }
                    if memcmp(found, pattern.baseAddress!, pattern.count) == 0 { return true }
                    cursor = UnsafeRawPointer(found) + 1
                }
                return false
            }
        }
    }
}
