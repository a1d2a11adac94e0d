import CipherFormats
import CPKCS11
import Foundation

/// A key-encryption key that never leaves a PKCS#11 token (an HSM, a smart card, SoftHSM2):
/// wrapping and unwrapping run AES-256-GCM on the token (`CKM_AES_GCM`, `C_Encrypt` and
/// `C_Decrypt`), with a random 96-bit IV per wrap, ``KeyWrappingContext/associatedData`` as the
/// additional data and a 128-bit tag. A wrapped value has the layout of
/// ``LocalKeyEncryptionKey``'s: the 12-byte IV, the 32 encrypted bytes and the 16-byte tag.
///
/// Making one loads the module (once per process and path, however many KEKs use it), finds the
/// token by label (or slot id), opens a session, logs in as the user with the PIN and finds the
/// AES secret key by its label (`CKA_LABEL`). The PIN is read from a variable or from a file
/// under the key-file rules (regular file, owner, mode 0600 or stricter), kept in a zeroed buffer
/// only until the login, and never appears in an error. The session is shared by copies of the
/// KEK and used by one thread at a time.
///
/// The module reads its own configuration from the process environment (SoftHSM2:
/// `SOFTHSM2_CONF`) when it is first loaded; `environment` is used for the PIN's variable only.
/// Logins are per token and per process in PKCS#11: when another session of this process is
/// logged in to the token already, the token does not check the PIN again.
///
/// ```swift
/// let kek = try PKCS11KeyEncryptionKey(id: "hsm-2026", reference: PKCS11KeyReference(
///     module: "/usr/lib/softhsm/libsofthsm2.so", tokenLabel: "app", keyLabel: "kek-2026", pin: .environment("APP_HSM_PIN")))
/// let wrapped = try kek.wrap(DataKey.random(), context: KeyWrappingContext(dataKeyID: "data-2026", keyEncryptionKeyID: kek.id))
/// ```
public struct PKCS11KeyEncryptionKey: KeyEncryptionKey {
    /// The KEK's id.
    public let id: String
    /// The key on its token.
    public let reference: PKCS11KeyReference
    private let session: PKCS11Session

    /// The size of the random IV of each wrap, in bytes.
    static let ivSize = 12
    /// The size of the GCM tag, in bytes.
    static let tagSize = 16

    /// Loads the module, finds the token, logs in with the PIN and finds the key.
    /// - Parameter environment: where the PIN's variable is looked up; `nil` for the process
    ///   environment.
    /// - Throws: ``KeyWrappingProblem/pkcs11(_:)`` with the step that failed: the module missing or
    ///   not a PKCS#11 module, no such token (the labels found are listed), the PIN's source empty
    ///   or unreadable, a wrong or locked PIN, no such key, or a token without AES-GCM.
    public init(id: String, reference: PKCS11KeyReference, environment: [String: String]? = nil) throws(KeyWrappingProblem) {
        self.id = id
        self.reference = reference
        do throws(PKCS11Problem) {
            let module = try PKCS11Module.load(path: reference.module)
            let (slot, token) = try Self.slot(for: reference, in: module)
            guard module.supports(CK_MECHANISM_TYPE(CKM_AES_GCM), slot: slot) else {
                throw .mechanismUnsupported(mechanism: "CKM_AES_GCM", token: token)
            }
            let pin = try Self.readPIN(reference.pin, kekID: id, environment: environment)
            session = try PKCS11Session(module: module, slot: slot, token: token, pin: pin, keyLabel: reference.keyLabel)
        } catch {
            throw .pkcs11(error)
        }
    }

    /// Encrypts `dataKey` on the token with a fresh random IV.
    /// - Throws: ``KeyWrappingProblem/pkcs11(_:)`` when the token refuses.
    public func wrap(_ dataKey: DataKey, context: KeyWrappingContext) throws -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        let iv = (0..<Self.ivSize).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        do throws(PKCS11Problem) {
            let sealed = try session.encrypt(dataKey.bytes, iv: iv, associatedData: context.associatedData)
            guard sealed.count == DataKey.byteCount + Self.tagSize else {
                throw .failed(function: "C_Encrypt", returnValue: CK_RV(CKR_FUNCTION_FAILED))
            }
            return iv + sealed
        } catch {
            throw KeyWrappingProblem.pkcs11(error)
        }
    }

    /// Decrypts on the token a value ``wrap(_:context:)`` made for the same context.
    /// - Throws: ``KeyWrappingProblem/wrappedValueSize(bytes:)``, ``KeyWrappingProblem/doesNotAuthenticate``
    ///   (another KEK made it, it was altered, or it belongs to another key entry) or
    ///   ``KeyWrappingProblem/pkcs11(_:)`` when the token fails.
    public func unwrap(_ wrapped: [UInt8], context: KeyWrappingContext) throws -> DataKey {
        guard wrapped.count == Self.ivSize + DataKey.byteCount + Self.tagSize else {
            throw KeyWrappingProblem.wrappedValueSize(bytes: wrapped.count)
        }
        let opened: SecretBytes?
        do throws(PKCS11Problem) {
            opened = try session.decrypt(Array(wrapped.dropFirst(Self.ivSize)), iv: Array(wrapped.prefix(Self.ivSize)), associatedData: context.associatedData)
        } catch {
            throw KeyWrappingProblem.pkcs11(error)
        }
        guard let opened, opened.count == DataKey.byteCount else { throw KeyWrappingProblem.doesNotAuthenticate }
        return DataKey(bytes: opened)
    }

    /// The slot of the token `reference` names, and the token's name for errors.
    private static func slot(for reference: PKCS11KeyReference, in module: PKCS11Module) throws(PKCS11Problem) -> (CK_SLOT_ID, String) {
        let tokens = try module.tokens()
        if let label = reference.tokenLabel {
            let matches = tokens.filter { $0.label == label }
            guard let match = matches.first else {
                throw .tokenNotFound(token: "\"\(label)\"", module: module.path, found: tokens.compactMap(\.label))
            }
            return (match.slot, "\"\(label)\"")
        }
        if let slot = reference.slot {
            guard tokens.contains(where: { $0.slot == CK_SLOT_ID(slot) && $0.label != nil }) else {
                throw .tokenNotFound(token: "in slot \(slot)", module: module.path, found: tokens.compactMap(\.label))
            }
            return (CK_SLOT_ID(slot), "in slot \(slot)")
        }
        guard let first = tokens.first(where: { $0.label != nil }), let label = first.label else {
            throw .tokenNotFound(token: "(the first initialized one)", module: module.path, found: [])
        }
        return (first.slot, "\"\(label)\"")
    }

    /// The user PIN from its source, in a zeroed buffer; a file's trailing newline is not part of it.
    private static func readPIN(_ source: PKCS11KeyReference.PINSource, kekID: String, environment: [String: String]?) throws(PKCS11Problem) -> SecretBytes {
        switch source {
        case .environment(let variable):
            let shown = "environment variable " + KeyConfigurationError.shownVariableName(variable)
            guard let value = KeySourceResolver.environmentValue(variable, in: environment) else {
                throw .pinUnavailable(source: shown, reason: "it is not set; export it before running")
            }
            guard value.count > 0 else { throw .pinUnavailable(source: shown, reason: "it is empty") }
            return value
        case .file(let path):
            let content: SecretBytes
            do {
                content = try KeySourceResolver.readKeyFile(path: path, keyID: kekID, database: KeyEncryptionKeyEntry.listName)
            } catch {
                throw .pinUnavailable(source: "file \(path)", reason: Self.reason(error, path: path))
            }
            let pin = content.withUnsafeBytes { raw in
                var bytes = raw[...]
                while let last = bytes.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") { bytes = bytes.dropLast() }
                return SecretBytes(copying: bytes)
            }
            guard pin.count > 0 else { throw .pinUnavailable(source: "file \(path)", reason: "it is empty") }
            return pin
        }
    }

    /// Why a PIN file could not be read, in the key-file rules' words.
    private static func reason(_ error: KeyConfigurationError, path: String) -> String {
        switch error {
        case let .keyFileUnreadable(_, _, _, reason): return "\(reason); check the path, and that it is a regular file this user can read"
        case let .keyFileTooPermissive(_, mode, _, _): return "group or others can read it (mode \(String(mode, radix: 8))); run: chmod 600 \(path)"
        case let .keyFileUntrusted(_, _, _, problem): return problem.explanation(path: path)
        default: return error.description
        }
    }
}
