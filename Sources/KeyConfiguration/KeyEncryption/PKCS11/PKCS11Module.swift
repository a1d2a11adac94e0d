import CPKCS11
import DurableFiles
import Foundation

/// A PKCS#11 module (a token vendor's shared library), loaded once per process: `dlopen`, then
/// `C_GetFunctionList` and `C_Initialize` with the operating system's locking, so that sessions
/// on several threads are safe.
///
/// A module is initialized once per process and never finalized: PKCS#11 allows one
/// `C_Initialize` per process, and other code in the process (another library, another KEK on the
/// same module) may share it; `CKR_CRYPTOKI_ALREADY_INITIALIZED` is taken as success for that
/// reason. A module that failed to load is not remembered, so a later attempt tries again.
final class PKCS11Module: @unchecked Sendable {
    /// The path it was loaded from, as the Keys file gives it.
    let path: String
    /// The module's function list; the module owns it and keeps it for the life of the process.
    let functions: UnsafeMutablePointer<CK_FUNCTION_LIST>

    private init(path: String, functions: UnsafeMutablePointer<CK_FUNCTION_LIST>) {
        self.path = path
        self.functions = functions
    }

    /// Modules loaded by this process, by path. The lock is held while a module loads, so two
    /// threads never initialize the same module.
    private static let loaded = Locked<[String: PKCS11Module]>([:])

    /// The module at `path`, loaded and initialized on first use.
    /// - Throws: ``PKCS11Problem/moduleMissing(module:reason:)``, ``PKCS11Problem/notAModule(module:)``,
    ///   or ``PKCS11Problem/failed(function:returnValue:)`` when `C_Initialize` fails.
    static func load(path: String) throws(PKCS11Problem) -> PKCS11Module {
        try loaded.withLock { (modules) throws(PKCS11Problem) -> PKCS11Module in
            if let module = modules[path] { return module }
            // RTLD_LOCAL: the module's symbols stay out of the process's namespace.
            guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
                throw .moduleMissing(module: path, reason: dlerror().map { String(cString: $0) } ?? "dlopen failed")
            }
            guard let symbol = dlsym(handle, "C_GetFunctionList") else {
                dlclose(handle)
                throw .notAModule(module: path)
            }
            let getFunctionList = unsafeBitCast(symbol, to: CK_C_GetFunctionList.self)
            var list: UnsafeMutablePointer<CK_FUNCTION_LIST>?
            let listed = getFunctionList(&list)
            guard listed == CKR_OK, let list, let initialize = list.pointee.C_Initialize else {
                dlclose(handle)
                throw listed == CKR_OK ? .notAModule(module: path) : .failed(function: "C_GetFunctionList", returnValue: listed)
            }
            var arguments = CK_C_INITIALIZE_ARGS()
            arguments.flags = CKF_OS_LOCKING_OK
            let initialized = withUnsafeMutablePointer(to: &arguments) { initialize(UnsafeMutableRawPointer($0)) }
            guard initialized == CKR_OK || initialized == CKR_CRYPTOKI_ALREADY_INITIALIZED else {
                dlclose(handle)
                throw .failed(function: "C_Initialize", returnValue: initialized)
            }
            // The handle stays open for the life of the process: the function list points into it.
            let module = PKCS11Module(path: path, functions: list)
            modules[path] = module
            return module
        }
    }

    /// Runs a PKCS#11 function the module must have; a missing entry is `CKR_FUNCTION_FAILED`.
    func call<Function>(_ function: KeyPath<CK_FUNCTION_LIST, Function?>, _ body: (Function) -> CK_RV) -> CK_RV {
        guard let entry = functions.pointee[keyPath: function] else { return CKR_FUNCTION_FAILED }
        return body(entry)
    }

    /// The ids of the slots that hold a token, and each token's label (trailing spaces removed;
    /// `nil` for a token that is not initialized).
    /// - Throws: ``PKCS11Problem/failed(function:returnValue:)``.
    func tokens() throws(PKCS11Problem) -> [(slot: CK_SLOT_ID, label: String?)] {
        var count: CK_ULONG = 0
        var status = call(\.C_GetSlotList) { $0(CK_BBOOL(CK_TRUE), nil, &count) }
        guard status == CKR_OK else { throw .failed(function: "C_GetSlotList", returnValue: status) }
        var slots = [CK_SLOT_ID](repeating: 0, count: Int(count))
        status = call(\.C_GetSlotList) { function in
            slots.withUnsafeMutableBufferPointer { function(CK_BBOOL(CK_TRUE), $0.baseAddress, &count) }
        }
        guard status == CKR_OK else { throw .failed(function: "C_GetSlotList", returnValue: status) }
        var found: [(slot: CK_SLOT_ID, label: String?)] = []
        for slot in slots.prefix(Int(count)) {
            var info = CK_TOKEN_INFO()
            guard call(\.C_GetTokenInfo, { $0(slot, &info) }) == CKR_OK else { continue }
            guard info.flags & CKF_TOKEN_INITIALIZED != 0 else {
                found.append((slot, nil))
                continue
            }
            let label = withUnsafeBytes(of: info.label) { String(decoding: $0, as: UTF8.self) }
            found.append((slot, String(label.reversed().drop { $0 == " " || $0 == "\0" }.reversed())))
        }
        return found
    }

    /// Whether the token in `slot` does `mechanism` for both encryption and decryption.
    func supports(_ mechanism: CK_MECHANISM_TYPE, slot: CK_SLOT_ID) -> Bool {
        var info = CK_MECHANISM_INFO()
        let status = call(\.C_GetMechanismInfo) { $0(slot, mechanism, &info) }
        let both = CK_FLAGS(CKF_ENCRYPT | CKF_DECRYPT)
        return status == CKR_OK && info.flags & both == both
    }
}
