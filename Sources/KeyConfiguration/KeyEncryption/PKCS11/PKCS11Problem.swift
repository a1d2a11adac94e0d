import Foundation

/// Why a PKCS#11 key-encryption key could not be used: which step failed and what to do. Never
/// holds the PIN or key material.
///
/// It reaches callers as ``KeyWrappingProblem/pkcs11(_:)``, inside the Keys file's
/// ``KeyConfigurationError/keyEncryptionKeyUnavailable(keyEncryptionKeyID:source:problem:)``.
///
/// ```swift
/// do {
///     _ = try PKCS11KeyEncryptionKey(id: "hsm-2026", reference: reference)
/// } catch .pkcs11(.pinIncorrect(let token)) {
///     print("wrong PIN for token \(token)")
/// } catch {
///     print(error)
/// }
/// ```
public enum PKCS11Problem: Error, Sendable, Equatable, CustomStringConvertible {
    /// The module's file could not be loaded (`reason`: the dynamic loader's words).
    case moduleMissing(module: String, reason: String)
    /// The file loaded but exports no `C_GetFunctionList`: it is not a PKCS#11 module.
    case notAModule(module: String)
    /// No token with this label (or no slot with this id); `found` lists the tokens' labels that
    /// are there.
    case tokenNotFound(token: String, module: String, found: [String])
    /// The token refused the user PIN (`CKR_PIN_INCORRECT`).
    case pinIncorrect(token: String)
    /// The token's user PIN is locked after too many wrong PINs (`CKR_PIN_LOCKED`).
    case pinLocked(token: String)
    /// The PIN's source gave nothing: the variable is unset or empty, or the file could not be
    /// read under the key-file rules (`reason` says which).
    case pinUnavailable(source: String, reason: String)
    /// No AES secret key (`CKO_SECRET_KEY`) with this `CKA_LABEL` on the token.
    case keyNotFound(label: String, token: String)
    /// More than one secret key has this label, so which one wraps is not clear.
    case keyAmbiguous(label: String, token: String, count: Int)
    /// The token does not do this mechanism (`CKM_AES_GCM`) with this key.
    case mechanismUnsupported(mechanism: String, token: String)
    /// Any other failure: the PKCS#11 function and its return value.
    case failed(function: String, returnValue: UInt)

    /// What went wrong and what to do, without the PIN.
    public var description: String {
        switch self {
        case let .moduleMissing(module, reason):
            return "the PKCS#11 module \(module) could not be loaded (\(reason)); install the token's library (SoftHSM2: the softhsm2 package) or correct pkcs11: module:"
        case .notAModule(let module):
            return "\(module) is not a PKCS#11 module (it has no C_GetFunctionList); pkcs11: module: names the token vendor's PKCS#11 library"
        case let .tokenNotFound(token, module, found):
            let there = found.isEmpty ? "no initialized token" : "tokens " + found.map { "\"\($0)\"" }.joined(separator: ", ")
            return "no token \(token) in \(module) (found \(there)); correct pkcs11: token: or slot:, or initialize the token"
        case .pinIncorrect(let token):
            return "token \(token) refused the user PIN (CKR_PIN_INCORRECT); correct the PIN in pin_env:'s variable or pin_file:'s file (repeated wrong PINs can lock the token)"
        case .pinLocked(let token):
            return "token \(token)'s user PIN is locked (CKR_PIN_LOCKED) after too many wrong PINs; the security officer must unlock it (C_InitPIN, e.g. softhsm2-util or the vendor's tool)"
        case let .pinUnavailable(source, reason):
            return "the token's user PIN could not be read from \(source): \(reason); set it there (never in the Keys file)"
        case let .keyNotFound(label, token):
            return "no AES secret key labelled \(label) on token \(token); correct pkcs11: key:, or make the key on the token (e.g. pkcs11-tool --keygen --key-type AES:32 --label \(label))"
        case let .keyAmbiguous(label, token, count):
            return "\(count) secret keys are labelled \(label) on token \(token); give the key-encryption key a label of its own"
        case let .mechanismUnsupported(mechanism, token):
            return "token \(token) cannot do \(mechanism) with this key; use an AES-256 key with encrypt and decrypt allowed on a token that supports \(mechanism)"
        case let .failed(function, returnValue):
            return "\(function) failed: \(Self.name(of: returnValue))"
        }
    }

    /// A return value's name (`CKR_…`) when it is a common one, else its number in hex.
    public static func name(of returnValue: UInt) -> String {
        let names: [UInt: String] = [
            0x00: "CKR_OK", 0x01: "CKR_CANCEL", 0x02: "CKR_HOST_MEMORY", 0x03: "CKR_SLOT_ID_INVALID",
            0x05: "CKR_GENERAL_ERROR", 0x06: "CKR_FUNCTION_FAILED", 0x07: "CKR_ARGUMENTS_BAD",
            0x30: "CKR_DEVICE_ERROR", 0x31: "CKR_DEVICE_MEMORY", 0x32: "CKR_DEVICE_REMOVED",
            0x40: "CKR_ENCRYPTED_DATA_INVALID", 0x41: "CKR_ENCRYPTED_DATA_LEN_RANGE",
            0x60: "CKR_KEY_HANDLE_INVALID", 0x68: "CKR_KEY_FUNCTION_NOT_PERMITTED",
            0x70: "CKR_MECHANISM_INVALID", 0x71: "CKR_MECHANISM_PARAM_INVALID",
            0xA0: "CKR_PIN_INCORRECT", 0xA4: "CKR_PIN_LOCKED", 0xB0: "CKR_SESSION_CLOSED",
            0xB3: "CKR_SESSION_HANDLE_INVALID", 0xE0: "CKR_TOKEN_NOT_PRESENT",
            0xE1: "CKR_TOKEN_NOT_RECOGNIZED", 0x101: "CKR_USER_NOT_LOGGED_IN",
            0x150: "CKR_BUFFER_TOO_SMALL", 0x190: "CKR_CRYPTOKI_NOT_INITIALIZED",
        ]
        return names[returnValue] ?? "CKR 0x" + String(returnValue, radix: 16)
    }
}
