import Yams

/// Where a loaded Keys file's text holds what a master-key rotation edits: the `wrapped_by:` and
/// `wrapped_key:` values of every wrapped data key and the places a key-encryption key is
/// appended, as the one parse of the file found them (lines and columns counted from 1, columns in
/// Unicode scalars, as libyaml counts them). With it the rotation edits the text without parsing
/// it again, and checks its edit without parsing what it did not change (``MasterKeyRotation``).
/// It holds no key material.
struct KeysFileLayout: Sendable {
    /// A scalar's first character and how it is quoted.
    struct ScalarPlace: Sendable, Equatable {
        enum Quoting: Sendable, Equatable { case plain, singleQuoted, doubleQuoted, other }
        let line: Int
        let column: Int
        let quoting: Quoting

        /// The place of `node` when it is a scalar with a mark.
        init?(_ node: Node?) {
            guard case .scalar(let scalar)? = node, let mark = scalar.mark else { return nil }
            line = mark.line
            column = mark.column
            switch scalar.style {
            case .plain: quoting = .plain
            case .singleQuoted: quoting = .singleQuoted
            case .doubleQuoted: quoting = .doubleQuoted
            default: quoting = .other
            }
        }
    }

    /// The places of one wrapped data key's values.
    struct WrappedPlaces: Sendable, Equatable {
        let wrappedBy: ScalarPlace
        let wrappedKey: ScalarPlace
    }

    /// By database entry, then by key: the places of a wrapped key's values (`nil` for other keys,
    /// or when a value is not a scalar).
    var wrappedValues: [[WrappedPlaces?]] = []
    /// `true` when the top level is a block mapping (`name:` lines).
    var topLevelIsBlockMapping = false
    /// The line of the top-level `key_encryption_keys:` field name, when there is one.
    var keyEncryptionKeysLine: Int?
    /// The `key_encryption_keys:` list when it is a block list with an item: where it starts (its
    /// first dash) and the line of its last item.
    var keyEncryptionKeyList: (line: Int, column: Int, lastItemLine: Int)?
    /// Where the top-level `databases:` field name is.
    var databasesKey: (line: Int, column: Int)?
    /// The size and a hash of the file's bytes: the text that was loaded, to tell it from a text
    /// read again later (this process only: the hash is seeded per process).
    var fingerprint: (count: Int, hash: Int) = (0, 0)

    /// The fingerprint of `bytes`.
    static func fingerprint(of bytes: UnsafeRawBufferPointer) -> (count: Int, hash: Int) {
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        return (bytes.count, hasher.finalize())
    }
}
