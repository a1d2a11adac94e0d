import Foundation

/// Whether a key-encryption key (KEK) can be retired: no wrapped data key of the Keys file names
/// it, and it is not the current (last) KEK, which wraps new data keys. Reads the Keys file only:
/// a KEK wraps data keys, not databases, so no database needs to be opened, and nothing is
/// unwrapped.
///
/// ```swift
/// let check = KeyEncryptionKeyRetirement(keysFile: try KeysFile.load(path: "Keys"), keyEncryptionKeyID: "kek-2025")
/// if check.canRetire { print("delete kek-2025's entry and its material") }
/// ```
public struct KeyEncryptionKeyRetirement: Sendable, Codable, Equatable {
    /// A key entry whose wrapped value the KEK made.
    public struct WrappedKey: Sendable, Codable, Equatable {
        /// The database entry's path or pattern, as the Keys file writes it.
        public let database: String
        /// The data key's id.
        public let keyID: String
    }

    /// The KEK checked.
    public let keyEncryptionKeyID: String
    /// `false` when `key_encryption_keys:` does not list it (nothing needs it then, unless a
    /// wrapped value still names it).
    public let isListed: Bool
    /// `true` when it is the last KEK, which `rekey keys new --wrapped` wraps new data keys with.
    public let isCurrent: Bool
    /// The wrapped data keys it made, in file order.
    public let wrappedKeys: [WrappedKey]

    /// `true` when it can be removed from the Keys file and its material destroyed.
    public var canRetire: Bool { !isCurrent && wrappedKeys.isEmpty }

    /// Checks `keyEncryptionKeyID` against every wrapped value of `keysFile`.
    public init(keysFile: KeysFile, keyEncryptionKeyID: String) {
        self.keyEncryptionKeyID = keyEncryptionKeyID
        isListed = keysFile.keyEncryptionKeys.ids.contains(keyEncryptionKeyID)
        isCurrent = keysFile.keyEncryptionKeys.currentID == keyEncryptionKeyID
        wrappedKeys = keysFile.entries.flatMap { entry in
            entry.keys.compactMap { key -> WrappedKey? in
                guard case .wrapped(let value) = key.source, value.keyEncryptionKeyID == keyEncryptionKeyID else { return nil }
                return WrappedKey(database: entry.configuredPath, keyID: key.id)
            }
        }
    }
}
