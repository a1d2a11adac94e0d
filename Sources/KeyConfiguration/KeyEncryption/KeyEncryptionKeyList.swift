import CipherFormats
import DurableFiles
import Foundation

/// The key-encryption keys (KEKs) of a Keys file or an app, oldest first; the last one wraps new
/// data keys.
///
/// A KEK from a Keys file is resolved when a wrapped value first needs it, then kept: a passphrase
/// KEK runs its PBKDF2 once, a PKCS#11 KEK logs in to its token once, however many databases
/// share it. Each wrapped value is unwrapped once and kept too (copies of the list share both).
///
/// ```swift
/// let keks = KeyEncryptionKeyList([try LocalKeyEncryptionKey(id: "kek-2026", passphrase: "…", salt: salt)])
/// let wrapped = try keks.wrap(DataKey.random(), dataKeyID: "data-2026")
/// ```
public struct KeyEncryptionKeyList: Sendable, CustomStringConvertible {
    /// One KEK: resolved on first use, then kept, and so is a failure: a token that refused the
    /// PIN is not asked again for every database of the file (each wrong PIN brings a real token
    /// closer to locking it).
    final class Slot: Sendable {
        let id: String
        let source: String
        private let resolve: @Sendable ([String: String]?) throws(KeyConfigurationError) -> any KeyEncryptionKey
        private let resolved = Locked<Result<any KeyEncryptionKey, KeyConfigurationError>?>(nil)

        init(id: String, source: String, resolve: @escaping @Sendable ([String: String]?) throws(KeyConfigurationError) -> any KeyEncryptionKey) {
            self.id = id
            self.source = source
            self.resolve = resolve
        }

        func key(environment: [String: String]?) throws(KeyConfigurationError) -> any KeyEncryptionKey {
            try resolved.withLock { (slot) throws(KeyConfigurationError) -> any KeyEncryptionKey in
                if let kept = slot { return try kept.get() }
                let result = Result { () throws(KeyConfigurationError) in try resolve(environment) }
                slot = result
                return try result.get()
            }
        }
    }

    private struct UnwrapKey: Hashable {
        let value: WrappedDataKey
        let dataKeyID: String
    }

    let slots: [Slot]
    private let unwrapped = Locked<[UnwrapKey: DataKey]>([:])

    /// KEKs the app already holds, oldest first.
    public init(_ keys: [any KeyEncryptionKey]) {
        slots = keys.map { key in Slot(id: key.id, source: "\(type(of: key))") { _ in key } }
    }

    init(slots: [Slot]) {
        self.slots = slots
    }

    /// No KEKs.
    public static let empty = KeyEncryptionKeyList([])

    /// The KEKs' ids, oldest first.
    public var ids: [String] { slots.map(\.id) }

    /// The id of the KEK that wraps new data keys (the last), or `nil` when there is none.
    public var currentID: String? { slots.last?.id }

    /// The KEK `id`, resolved (its passphrase derived, its token logged in) if this is its first use.
    /// - Throws: ``KeyConfigurationError/keyEncryptionKeyNotListed(keyEncryptionKeyID:keyID:database:listed:)``
    ///   (with an empty key id and database) when no KEK has this id, or the errors of its source.
    public func key(id: String, environment: [String: String]? = nil) throws(KeyConfigurationError) -> any KeyEncryptionKey {
        guard let slot = slots.first(where: { $0.id == id }) else {
            throw .keyEncryptionKeyNotListed(keyEncryptionKeyID: id, keyID: "", database: "", listed: ids)
        }
        return try slot.key(environment: environment)
    }

    /// Wraps `dataKey` as the data key `dataKeyID`, with the KEK `keyEncryptionKeyID` (by default
    /// the current one).
    /// - Throws: ``KeyConfigurationError/keyEncryptionKeyNotListed(keyEncryptionKeyID:keyID:database:listed:)``,
    ///   ``KeyConfigurationError/wrapping(keyID:keyEncryptionKeyID:database:problem:)`` or the errors of the KEK's source.
    public func wrap(_ dataKey: DataKey, dataKeyID: String, with keyEncryptionKeyID: String? = nil, environment: [String: String]? = nil) throws(KeyConfigurationError) -> WrappedDataKey {
        guard let kekID = keyEncryptionKeyID ?? currentID else {
            throw .keyEncryptionKeyNotListed(keyEncryptionKeyID: "", keyID: dataKeyID, database: "", listed: [])
        }
        let kek = try key(id: kekID, environment: environment)
        let context = KeyWrappingContext(dataKeyID: dataKeyID, keyEncryptionKeyID: kekID)
        do {
            return WrappedDataKey(bytes: try kek.wrap(dataKey, context: context), wrappedBy: kekID)
        } catch {
            throw .wrapping(keyID: dataKeyID, keyEncryptionKeyID: kekID, database: "", problem: Self.problem(error))
        }
    }

    /// The data key `wrapped` holds for key entry `dataKeyID` of `database`, unwrapped by the KEK
    /// it names (once per value; later calls return the kept key).
    /// - Throws: ``KeyConfigurationError/keyEncryptionKeyNotListed(keyEncryptionKeyID:keyID:database:listed:)``,
    ///   ``KeyConfigurationError/unwrapping(keyID:keyEncryptionKeyID:database:problem:)`` or the errors of the KEK's source.
    public func unwrap(_ wrapped: WrappedDataKey, dataKeyID: String, database: String, environment: [String: String]? = nil) throws(KeyConfigurationError) -> DataKey {
        let cacheKey = UnwrapKey(value: wrapped, dataKeyID: dataKeyID)
        if let kept = unwrapped.withLock({ $0[cacheKey] }) { return kept }
        let kekID = wrapped.keyEncryptionKeyID
        guard slots.contains(where: { $0.id == kekID }) else {
            throw .keyEncryptionKeyNotListed(keyEncryptionKeyID: kekID, keyID: dataKeyID, database: database, listed: ids)
        }
        let kek = try key(id: kekID, environment: environment)
        let dataKey: DataKey
        do {
            dataKey = try kek.unwrap(wrapped.bytes, context: KeyWrappingContext(dataKeyID: dataKeyID, keyEncryptionKeyID: kekID))
        } catch {
            throw .unwrapping(keyID: dataKeyID, keyEncryptionKeyID: kekID, database: database, problem: Self.problem(error))
        }
        unwrapped.withLock { $0[cacheKey] = dataKey }
        return dataKey
    }

    /// A thrown error as a ``KeyWrappingProblem`` (another type's description, which an
    /// implementation must keep free of secrets, becomes ``KeyWrappingProblem/keyManager(_:)``).
    static func problem(_ error: any Error) -> KeyWrappingProblem {
        (error as? KeyWrappingProblem) ?? .keyManager(String(describing: error))
    }

    /// `KeyEncryptionKeyList(kek-2025, kek-2026*)`; `*` marks the current KEK.
    public var description: String {
        "KeyEncryptionKeyList(" + ids.map { $0 == currentID ? "\($0)*" : $0 }.joined(separator: ", ") + ")"
    }
}
