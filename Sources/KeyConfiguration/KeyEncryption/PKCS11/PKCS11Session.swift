import CipherFormats
import CPKCS11
import Foundation

/// A logged-in session on a token and the handle of one AES secret key in it: AES-GCM runs on
/// the token, the key never leaves it.
///
/// A PKCS#11 session runs one operation at a time, so every call holds the lock (the module was
/// initialized with the operating system's locking, so sessions on other threads are safe too).
/// Closing the session (when the last KEK holding it goes away) ends it; the token logs the user
/// out when its last session closes.
final class PKCS11Session: @unchecked Sendable {
    let module: PKCS11Module
    /// The token's label, or `slot N`, for errors.
    let token: String
    private let lock = NSLock()
    // Invariant: both only used with `lock` held; set once in init.
    private let session: CK_SESSION_HANDLE
    private let key: CK_OBJECT_HANDLE

    /// Opens a session in `slot`, logs in as the user with `pin` and finds the secret key
    /// `keyLabel`.
    /// - Throws: ``PKCS11Problem/pinIncorrect(token:)``, ``PKCS11Problem/pinLocked(token:)``,
    ///   ``PKCS11Problem/keyNotFound(label:token:)``, ``PKCS11Problem/keyAmbiguous(label:token:count:)``
    ///   or ``PKCS11Problem/failed(function:returnValue:)``.
    init(module: PKCS11Module, slot: CK_SLOT_ID, token: String, pin: SecretBytes, keyLabel: String) throws(PKCS11Problem) {
        self.module = module
        self.token = token
        var session = CK_SESSION_HANDLE(CK_INVALID_HANDLE)
        let opened = module.call(\.C_OpenSession) { $0(slot, CK_FLAGS(CKF_SERIAL_SESSION), nil, nil, &session) }
        guard opened == CKR_OK else { throw .failed(function: "C_OpenSession", returnValue: opened) }
        do throws(PKCS11Problem) {
            try Self.login(module: module, session: session, token: token, pin: pin)
            key = try Self.findSecretKey(module: module, session: session, label: keyLabel, token: token)
        } catch {
            _ = module.call(\.C_CloseSession) { $0(session) }
            throw error
        }
        self.session = session
    }

    deinit {
        _ = module.call(\.C_CloseSession) { $0(session) }
    }

    private static func login(module: PKCS11Module, session: CK_SESSION_HANDLE, token: String, pin: SecretBytes) throws(PKCS11Problem) {
        let status = pin.withUnsafeBytes { bytes in
            // C_Login takes a non-const pointer; it only reads the PIN.
            let start = UnsafeMutablePointer(mutating: bytes.bindMemory(to: UInt8.self).baseAddress)
            return module.call(\.C_Login) { $0(session, CK_USER_TYPE(CKU_USER), start, CK_ULONG(bytes.count)) }
        }
        switch status {
        // Another session of this process is logged in to the token already: the login is shared.
        case CKR_OK, CKR_USER_ALREADY_LOGGED_IN: return
        case CKR_PIN_INCORRECT, CKR_PIN_LEN_RANGE, CKR_PIN_INVALID: throw .pinIncorrect(token: token)
        case CKR_PIN_LOCKED: throw .pinLocked(token: token)
        default: throw .failed(function: "C_Login", returnValue: status)
        }
    }

    private static func findSecretKey(module: PKCS11Module, session: CK_SESSION_HANDLE, label: String, token: String) throws(PKCS11Problem) -> CK_OBJECT_HANDLE {
        var keyClass = CK_OBJECT_CLASS(CKO_SECRET_KEY)
        var labelBytes = Array(label.utf8)
        var found = [CK_OBJECT_HANDLE](repeating: CK_OBJECT_HANDLE(CK_INVALID_HANDLE), count: 2)
        var count: CK_ULONG = 0
        let status: (function: String, value: CK_RV) = withUnsafeMutableBytes(of: &keyClass) { classBytes in
            labelBytes.withUnsafeMutableBytes { labelBuffer in
                var template = [
                    CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_CLASS), pValue: classBytes.baseAddress, ulValueLen: CK_ULONG(classBytes.count)),
                    CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_LABEL), pValue: labelBuffer.baseAddress, ulValueLen: CK_ULONG(labelBuffer.count)),
                ]
                let started = template.withUnsafeMutableBufferPointer { attributes in
                    module.call(\.C_FindObjectsInit) { $0(session, attributes.baseAddress, CK_ULONG(attributes.count)) }
                }
                guard started == CKR_OK else { return ("C_FindObjectsInit", started) }
                let searched = found.withUnsafeMutableBufferPointer { handles in
                    module.call(\.C_FindObjects) { $0(session, handles.baseAddress, CK_ULONG(handles.count), &count) }
                }
                let finished = module.call(\.C_FindObjectsFinal) { $0(session) }
                return searched != CKR_OK ? ("C_FindObjects", searched) : ("C_FindObjectsFinal", finished)
            }
        }
        guard status.value == CKR_OK else { throw .failed(function: status.function, returnValue: status.value) }
        switch count {
        case 0: throw .keyNotFound(label: label, token: token)
        case 1: return found[0]
        default: throw .keyAmbiguous(label: label, token: token, count: Int(count))
        }
    }

    /// The GCM parameters for `iv` and `associatedData` with a 128-bit tag, in the layout of the
    /// PKCS#11 2.40 header (`ulIvBits` included), handed to `body`.
    private func withGCMMechanism<Result>(iv: [UInt8], associatedData: [UInt8], _ body: (UnsafeMutablePointer<CK_MECHANISM>) -> Result) -> Result {
        var iv = iv
        var aad = associatedData
        return iv.withUnsafeMutableBufferPointer { ivBuffer in
            aad.withUnsafeMutableBufferPointer { aadBuffer in
                var parameters = CK_GCM_PARAMS(
                    pIv: ivBuffer.baseAddress, ulIvLen: CK_ULONG(ivBuffer.count), ulIvBits: CK_ULONG(ivBuffer.count * 8),
                    pAAD: aadBuffer.baseAddress, ulAADLen: CK_ULONG(aadBuffer.count), ulTagBits: 128)
                return withUnsafeMutableBytes(of: &parameters) { parameterBytes in
                    var mechanism = CK_MECHANISM(
                        mechanism: CK_MECHANISM_TYPE(CKM_AES_GCM), pParameter: parameterBytes.baseAddress,
                        ulParameterLen: CK_ULONG(parameterBytes.count))
                    return body(&mechanism)
                }
            }
        }
    }

    /// AES-GCM encryption of `plaintext` on the token: the ciphertext followed by the 16-byte tag.
    /// - Throws: ``PKCS11Problem/mechanismUnsupported(mechanism:token:)`` or
    ///   ``PKCS11Problem/failed(function:returnValue:)``.
    func encrypt(_ plaintext: SecretBytes, iv: [UInt8], associatedData: [UInt8]) throws(PKCS11Problem) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: plaintext.count + 64)
        var length = CK_ULONG(output.count)
        let status: (function: String, value: CK_RV) = lock.withLock {
            withGCMMechanism(iv: iv, associatedData: associatedData) { mechanism in
                let started = module.call(\.C_EncryptInit) { $0(session, mechanism, key) }
                guard started == CKR_OK else { return ("C_EncryptInit", started) }
                return ("C_Encrypt", plaintext.withUnsafeBytes { input in
                    output.withUnsafeMutableBufferPointer { out in
                        module.call(\.C_Encrypt) {
                            $0(session, UnsafeMutablePointer(mutating: input.bindMemory(to: UInt8.self).baseAddress),
                               CK_ULONG(input.count), out.baseAddress, &length)
                        }
                    }
                })
            }
        }
        guard status.value == CKR_OK else { throw Self.problem(status.function, status.value, token: token) }
        return Array(output.prefix(Int(length)))
    }

    /// AES-GCM decryption of `ciphertextAndTag` on the token, into a zeroed buffer; `nil` when
    /// the value does not authenticate.
    /// - Throws: ``PKCS11Problem/mechanismUnsupported(mechanism:token:)`` or
    ///   ``PKCS11Problem/failed(function:returnValue:)`` for anything but a value that does not
    ///   authenticate.
    func decrypt(_ ciphertextAndTag: [UInt8], iv: [UInt8], associatedData: [UInt8]) throws(PKCS11Problem) -> SecretBytes? {
        var input = ciphertextAndTag
        var length = CK_ULONG(input.count)
        var status: (function: String, value: CK_RV) = ("C_Decrypt", CKR_OK)
        // Room for the whole input: some tokens want an output as long as the input.
        let output = SecretBytes(count: input.count) { out in
            status = lock.withLock {
                withGCMMechanism(iv: iv, associatedData: associatedData) { mechanism in
                    let started = module.call(\.C_DecryptInit) { $0(session, mechanism, key) }
                    guard started == CKR_OK else { return ("C_DecryptInit", started) }
                    return ("C_Decrypt", input.withUnsafeMutableBufferPointer { inBuffer in
                        module.call(\.C_Decrypt) {
                            $0(session, inBuffer.baseAddress, CK_ULONG(inBuffer.count), out.bindMemory(to: UInt8.self).baseAddress, &length)
                        }
                    })
                }
            }
        }
        // A tag that does not verify: the standard answer is CKR_ENCRYPTED_DATA_INVALID; SoftHSM2
        // 2.6.1 answers CKR_GENERAL_ERROR (its OpenSSL decryptFinal fails).
        let notAuthentic: Set<CK_RV> = [CKR_ENCRYPTED_DATA_INVALID, CKR_ENCRYPTED_DATA_LEN_RANGE, CKR_GENERAL_ERROR, CKR_FUNCTION_FAILED]
        if status.value == CKR_OK {
            return output.withUnsafeBytes { SecretBytes(copying: $0.prefix(Int(length))) }
        }
        if status.function == "C_Decrypt", notAuthentic.contains(status.value) { return nil }
        throw Self.problem(status.function, status.value, token: token)
    }

    /// A failed call's problem: a mechanism or key the token refuses for AES-GCM is named as such.
    private static func problem(_ function: String, _ value: CK_RV, token: String) -> PKCS11Problem {
        switch value {
        case CKR_MECHANISM_INVALID, CKR_MECHANISM_PARAM_INVALID, CKR_KEY_TYPE_INCONSISTENT, CKR_KEY_FUNCTION_NOT_PERMITTED:
            return .mechanismUnsupported(mechanism: "CKM_AES_GCM", token: token)
        default:
            return .failed(function: function, returnValue: value)
        }
    }
}
