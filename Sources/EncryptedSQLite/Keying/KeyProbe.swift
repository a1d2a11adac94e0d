import CipherFormats
import KeyConfiguration
import SQLCipherConnection

/// Finds the key that opens a file: one fresh connection per attempt, current key first, then
/// the older keys from newest to oldest (``KeyList/trialOrder``). A key opens the file only when a read of the schema
/// succeeds with it.
struct KeyProbe {
    struct Outcome {
        let connection: Connection
        let key: ResolvedKey
        let attempts: [KeyAttempt]
    }

    let keys: KeyList
    let trial: KeyedConnections

    var path: String { trial.path }

    /// Looks at the file first (so that a missing, empty or plaintext file costs no key
    /// derivation), then tries the keys. An unencrypted file opens with the list's plaintext
    /// entry, when it has one. When no key opens the file, checks whether it is a SQLCipher 4 file
    /// one of the keys is right for although its settings name another format
    /// (`SQLCipher4Diagnosis`, ``diagnosable(_:)``).
    ///
    /// The returned key carries the cipher settings that opened the file (for a legacy key, the
    /// variant that matched).
    func run() throws(EncryptedDatabaseError) -> Outcome {
        let kind = DatabaseFileKind.inspect(path: path)
        if case .plaintextSQLite = kind, let plaintext = keys.plaintextKey {
            let stopwatch = Stopwatch()
            if let (connection, key) = try trial.find(plaintext) {
                return Outcome(connection: connection, key: key, attempts: [.init(keyID: key.id, opened: true, duration: stopwatch.elapsed)])
            }
            throw .noKeyOpens(path: path, triedKeyIDs: [plaintext.id])
        }
        try Self.requireEncryptedCandidate(kind, path: path)
        var attempts: [KeyAttempt] = []
        for key in keys.trialOrder {
            let stopwatch = Stopwatch()
            if let (connection, opened) = try trial.find(key, formats: Self.formats(for: key, isCurrent: key.id == keys.currentID)) {
                attempts.append(.init(keyID: key.id, opened: true, duration: stopwatch.elapsed))
                return Outcome(connection: connection, key: opened, attempts: attempts)
            }
            attempts.append(.init(keyID: key.id, opened: false, duration: stopwatch.elapsed))
        }
        let tried = attempts.map(\.keyID)
        if let keyID = SQLCipher4Diagnosis(path: path).matchingKeyID(among: Self.diagnosable(keys.trialOrder).map { ($0.id, $0.material) }) {
            throw .sqlcipher4File(path: path, keyID: keyID, triedKeyIDs: tried)
        }
        throw .noKeyOpens(path: path, triedKeyIDs: tried, hexLikePassphraseKeyIDs: keys.hexLikePassphraseKeyIDs.filter(tried.contains))
    }

    /// The formats to try `key` with: the current key's own format first (an up-to-date file costs
    /// one key derivation), then the other formats it may have written; for a passphrase, the
    /// cheaper key derivations before the dearer ones (SQLCipher 3's 64,000 SHA-1 rounds before
    /// SQLCipher 4's 256,000 SHA-512 rounds).
    static func formats(for key: ResolvedKey, isCurrent: Bool) -> [CipherSettings] {
        let all = key.settingsToTry
        guard key.material?.kind == .passphrase, all.count > 1 else { return all }
        let byCost = { (formats: ArraySlice<CipherSettings>) in
            formats.enumerated().sorted { ($0.element.format().passphraseCost, $0.offset) < ($1.element.format().passphraseCost, $1.offset) }.map(\.element)
        }
        return isCurrent ? [all[0]] + byCost(all.dropFirst()) : byCost(all[...])
    }

    /// The keys worth a SQLCipher 4 diagnosis: those whose own formats leave out SQLCipher 4's
    /// default format. The others (on SQLCipher 4, every key without settings) were just tried in
    /// that format; if one fits the file now, the file changed while it was probed (another
    /// process rotated it), which is a `noKeyOpens` that the caller probes again, not a matter of
    /// the key's settings. This also spares each passphrase a 256,000-round PBKDF2.
    static func diagnosable(_ keys: [ResolvedKey]) -> [ResolvedKey] {
        let sqlcipher4 = CipherGeneration.sqlcipher4.format
        return keys.filter { key in !key.settingsToTry.contains { $0.format() == sqlcipher4 } }
    }

    /// Throws the matching error unless the file could be an encrypted database.
    static func requireEncryptedCandidate(_ kind: DatabaseFileKind, path: String) throws(EncryptedDatabaseError) {
        switch kind {
        case .missing: throw .fileNotFound(path: path)
        case .notARegularFile(let kind): throw .notARegularFile(path: path, kind: kind)
        case .unreadable(let reason): throw .permissionDenied(path: path, reason: reason)
        case .empty: throw .emptyFile(path: path)
        case .tooShort(let bytes): throw .fileTooShort(path: path, bytes: bytes)
        case .plaintextSQLite: throw .plaintextDatabase(path: path)
        case .opaque: return
        }
    }
}
