import CipherFormats
import Foundation

/// A key-encryption key that never leaves a PKCS#11 token (an HSM, a smart card, SoftHSM2).
///
/// ```swift
/// let kek = try PKCS11KeyEncryptionKey(id: "hsm-2026", reference: PKCS11KeyReference(
///     module: "/usr/lib/softhsm/libsofthsm2.so", tokenLabel: "app", keyLabel: "kek-2026", pin: .environment("APP_HSM_PIN")))
/// ```
public struct PKCS11KeyEncryptionKey: KeyEncryptionKey {
    /// The KEK's id.
    public let id: String
    /// The key on its token.
    public let reference: PKCS11KeyReference

    /// Loads the module, finds the token, logs in with the PIN and finds the key.
    /// - Throws: ``KeyWrappingProblem``.
    public init(id: String, reference: PKCS11KeyReference, environment: [String: String]? = nil) throws(KeyWrappingProblem) {
        self.id = id
        self.reference = reference
        throw .keyManager("PKCS#11 key-encryption keys are not available in this build")
    }

    /// Encrypts on the token.
    public func wrap(_ dataKey: DataKey, context: KeyWrappingContext) throws -> [UInt8] {
        throw KeyWrappingProblem.keyManager("PKCS#11 key-encryption keys are not available in this build")
    }

    /// Decrypts on the token.
    public func unwrap(_ wrapped: [UInt8], context: KeyWrappingContext) throws -> DataKey {
        throw KeyWrappingProblem.keyManager("PKCS#11 key-encryption keys are not available in this build")
    }
}
