import CipherFormats
import Foundation
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
        // The first key's connection, when it costs no key derivation, is opened before the file
        // is looked at, and the first bytes are read through it: an open with a raw key reads
        // them once, through the connection it keeps, instead of through a raw connection of its
        // own (an open and close of a SQLite handle, ~25 µs). Nothing is read through SQLite
        // before the file is known to be a candidate; the checks are those of
        // `DatabaseFileKind.inspect(path:)`, with the same answers.
        let first = firstConnection()
        let kind = DatabaseFileKind.inspect(path: path, headerFrom: first?.connection)
        if let first {
            if case .opaque = kind {
                return try run(firstOpened: first)
            }
            first.connection.close()
        }
        if case .plaintextSQLite = kind, let plaintext = keys.plaintextKey {
            let stopwatch = Stopwatch()
            if let (connection, key) = try trial.find(plaintext) {
                return Outcome(connection: connection, key: key, attempts: [.init(keyID: key.id, opened: true, duration: stopwatch.elapsed)])
            }
            throw .noKeyOpens(path: path, triedKeyIDs: [plaintext.id])
        }
        try Self.requireEncryptedCandidate(kind, path: path)
        return try run(firstOpened: nil)
    }

    /// The trial of the first key's connection: opened with the first key in the trial order
    /// when that key is a raw key (no derivation), has one format to try, is not legacy (no beta
    /// variant to try), and the file is a regular file of at least one page; `nil` otherwise or
    /// when the open fails (the usual trial then opens again and reports the failure as it would).
    private func firstConnection() -> (connection: Connection, key: ResolvedKey, stopwatch: Stopwatch)? {
        guard let key = keys.trialOrder.first, key.material?.kind == .rawKey, !key.legacy else { return nil }
        let formats = Self.formats(for: key, isCurrent: key.id == keys.currentID)
        guard formats.count == 1 else { return nil }
        var status = stat()
        guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG, Int(status.st_size) >= 512 else { return nil }
        let stopwatch = Stopwatch()
        let keying = trial.keyed(key.with(formats[0]))
        guard keying.salt == nil, let connection = try? trial.connect(keying.key) else { return nil }
        return (connection, key.with(formats[0]), stopwatch)
    }

    /// Tries the keys in trial order; the first with `firstOpened`, its connection already open
    /// (``firstConnection()``) on a file that may be an encrypted database.
    private func run(firstOpened: (connection: Connection, key: ResolvedKey, stopwatch: Stopwatch)?) throws(EncryptedDatabaseError) -> Outcome {
        var attempts: [KeyAttempt] = []
        var remaining = keys.trialOrder[...]
        if let firstOpened {
            remaining = remaining.dropFirst()
            if let connection = try trial.verified(firstOpened.connection, key: firstOpened.key) {
                return Outcome(connection: connection, key: firstOpened.key,
                               attempts: [.init(keyID: firstOpened.key.id, opened: true, duration: firstOpened.stopwatch.elapsed)])
            }
            attempts.append(.init(keyID: firstOpened.key.id, opened: false, duration: firstOpened.stopwatch.elapsed))
        }
        for key in remaining {
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
