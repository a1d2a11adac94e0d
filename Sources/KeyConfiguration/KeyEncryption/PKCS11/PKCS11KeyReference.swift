import Foundation

/// Where a PKCS#11 key-encryption key lives: the module (the token's library), the token, the
/// key's label, and where its user PIN comes from (never the Keys file).
///
/// ```yaml
/// key_encryption_keys:
///   - id: hsm-2026
///     pkcs11:
///       module: /usr/lib/softhsm/libsofthsm2.so
///       token: app                 # the token's label (or slot: 0)
///       key: kek-2026              # the secret key's CKA_LABEL
///       pin_env: APP_HSM_PIN       # or pin_file: /run/secrets/hsm-pin
/// ```
public struct PKCS11KeyReference: Sendable, Hashable, CustomStringConvertible {
    /// Where the user PIN comes from.
    public enum PINSource: Sendable, Hashable, CustomStringConvertible {
        /// An environment variable's value.
        case environment(String)
        /// A file's content (trailing newline ignored), read under the key-file trust rules.
        case file(String)

        /// `env NAME` or `file PATH`.
        public var description: String {
            switch self {
            case .environment(let name): return "env \(name)"
            case .file(let path): return "file \(path)"
            }
        }
    }

    /// The PKCS#11 module's path (the token vendor's shared library).
    public var module: String
    /// The token's label; `nil` to use ``slot``.
    public var tokenLabel: String?
    /// The slot's id; `nil` to find the token by ``tokenLabel``.
    public var slot: UInt?
    /// The label (`CKA_LABEL`) of the AES secret key on the token.
    public var keyLabel: String
    /// Where the user PIN comes from.
    public var pin: PINSource

    /// A reference to the AES key `keyLabel` on the token `tokenLabel` (or in `slot`).
    public init(module: String, tokenLabel: String? = nil, slot: UInt? = nil, keyLabel: String, pin: PINSource) {
        self.module = module
        self.tokenLabel = tokenLabel
        self.slot = slot
        self.keyLabel = keyLabel
        self.pin = pin
    }

    /// `pkcs11 key kek-2026 on token app (module …)`, without the PIN.
    public var description: String {
        let token = tokenLabel.map { "token \($0)" } ?? slot.map { "slot \($0)" } ?? "the first token"
        return "pkcs11 key \(keyLabel) on \(token) (module \(module), PIN from \(pin))"
    }
}
