import CipherFormats
import Foundation

/// The text of a `passphrase` or `hex` key source, held in a buffer that is zeroed when the last
/// copy goes away (never in a `String`, whose memory the library cannot wipe). It is checked when
/// the key list is built, like every source.
///
/// Keys read from a `Keys` file go straight from the file's bytes into a `KeyText`. From code,
/// `KeySource.passphrase("…")` and `KeySource.passphrase(someString)` make one; the `String` you
/// pass stays yours to keep or drop.
///
/// ```swift
/// let source = KeySource.passphrase(KeyText("correct horse battery staple"))
/// ```
public struct KeyText: Sendable, ExpressibleByStringLiteral, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The bytes (UTF-8 text).
    package let bytes: SecretBytes

    /// Copies the UTF-8 bytes of `text`.
    public init(_ text: String) {
        bytes = SecretBytes(copying: text.utf8)
    }

    /// Copies a string literal's UTF-8 bytes.
    public init(stringLiteral value: String) {
        self.init(value)
    }

    /// Takes over `bytes`.
    package init(bytes: SecretBytes) {
        self.bytes = bytes
    }

    /// `KeyText(<secret>)`; never the text.
    public var description: String { "KeyText(<secret>)" }
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// Shows nothing of the text, so `dump()` never prints it.
    public var customMirror: Mirror { Mirror(self, children: []) }
}
