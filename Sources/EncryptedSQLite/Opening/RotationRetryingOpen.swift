import DurableFiles
import Foundation
import KeyConfiguration
import Logging

/// The open sequence when other processes may open, write or rotate the same file at the same
/// time: ``DatabaseOpener``'s sequence, started again (with the key list read again) when what it
/// met was another process's rotation rather than a fact about the file.
///
/// Two windows make a single pass give a wrong answer:
/// - the key probe tries the current key before another process's rotation commits and the old
///   key after it, so no key seems to open a healthy file (`noKeyOpens`);
/// - the rotation's connection was keyed with the old key before another process rotated the
///   file, so its lock fails with "not a database"
///   (``EncryptedDatabaseError/changedByAnotherProcess(path:keyID:operation:)``).
///
/// Both are answered by probing again, within the busy timeout: the second probe finds the key the
/// file is on now (and rotates only if that is still needed, so the loser of two concurrent
/// rotations does nothing). A `noKeyOpens` is probed again once, then again only while the file
/// keeps changing (``FileFingerprint``) or the key list changed; a list that really lacks the key
/// fails as before.
struct RotationRetryingOpen {
    let path: String
    let source: KeyListSource
    let options: OpenOptions
    /// The opening database's part in the step-aside protocol (see ``DatabaseOpener``).
    var stepAside: StepAsideLock? = nil

    /// Opens the file; `afterRotationElsewhere` when an open database found its file rotated by
    /// another process and opens it again.
    /// - Returns: the opened connection and the key list that opened it.
    /// - Throws: ``EncryptedDatabaseError`` as ``DatabaseOpener/open()``; when the file kept being
    ///   rotated past the busy timeout, the last error
    ///   (``EncryptedDatabaseError/changedByAnotherProcess(path:keyID:operation:)``, a busy error).
    func open(afterRotationElsewhere: Bool = false) throws(EncryptedDatabaseError) -> (opened: DatabaseOpener.Opened, keys: KeyList) {
        try repeating(afterRotationElsewhere: afterRotationElsewhere) { keys throws(EncryptedDatabaseError) in
            (try DatabaseOpener(path: path, keys: keys, options: options, stepAside: stepAside).open(), keys)
        }
    }

    /// Which key opens the file (``DatabaseOpener/check()``), probing again as ``open(afterRotationElsewhere:)`` does.
    /// - Throws: ``EncryptedDatabaseError`` as ``DatabaseOpener/check()``.
    func check() throws(EncryptedDatabaseError) -> KeyCheck {
        try repeating(afterRotationElsewhere: false) { keys throws(EncryptedDatabaseError) in
            try DatabaseOpener(path: path, keys: keys, options: options).check()
        }
    }

    /// Runs `body` with the key list, again (with the list read again) while what it met was
    /// another process's rotation, until the busy timeout.
    private func repeating<T>(afterRotationElsewhere: Bool, _ body: (KeyList) throws(EncryptedDatabaseError) -> T) throws(EncryptedDatabaseError) -> T {
        let deadline = ContinuousClock.now + options.busyTimeout
        var keys = try source.load(path: path, afterRotationElsewhere: afterRotationElsewhere)
        var attempt = 0
        while true {
            attempt += 1
            let before = FileFingerprint(path: path)
            do {
                return try body(keys)
            } catch {
                let reloaded = source.canChange ? try source.load(path: path, afterRotationElsewhere: afterRotationElsewhere) : keys
                let changed = FileFingerprint(path: path) != before || reloaded.ids != keys.ids
                let again: Bool = switch error {
                case .changedByAnotherProcess: true
                case .noKeyOpens: attempt == 1 || changed
                // Not `rotationNotApplied` and the like: this process's own rotation changed the
                // file, and must not be tried again.
                default: false
                }
                guard again, ContinuousClock.now < deadline else {
                    throw afterRotationElsewhere ? Self.explained(error, source: source) : error
                }
                options.logger.info("the file changed while it was being opened (another process rotated or wrote it); probing its key again", metadata: [
                    "path": "\(path)", "attempt": "\(attempt + 1)", "keys": "\(reloaded.ids.joined(separator: ","))", "reason": "\(error)",
                ])
                keys = reloaded
                usleep(useconds_t.random(in: 1000...5000))
            }
        }
    }

    /// A `noKeyOpens` met when catching up with another process's rotation says why this process
    /// lacks the key, and what to do.
    private static func explained(_ error: EncryptedDatabaseError, source: KeyListSource) -> EncryptedDatabaseError {
        guard case let .noKeyOpens(path, tried, _) = error else { return error }
        let advice = source.canChange
            ? "even after reading it again from \(source.name): add the key the file was rotated to there"
            : "which was given once when the database was opened: open it with EncryptedDatabase(path:keysFile:options:) or a key provider so that running processes follow rotations, or restart the process"
        return .keyUnavailable(path: path, reason: "the file was rotated by another process while this process had it open, and no key of this process's key list opens it now (tried: \(tried.joined(separator: ", "))), \(advice). Nothing was changed.")
    }
}

/// What `stat` says of a database file and its `-wal` and `-journal`: any write or rotation by
/// another process changes it (`stat` only: opening and closing a descriptor of the file would
/// drop this process's SQLite locks on it).
struct FileFingerprint: Equatable {
    private var parts: [[Int]] = []

    init(path: String) {
        for file in [path, path + "-wal", path + "-journal"] {
            var status = stat()
            guard stat(file, &status) == 0 else {
                parts.append([])
                continue
            }
            parts.append([Int(status.st_dev), Int(status.st_ino), Int(status.st_size), status.st_mtim.tv_sec, status.st_mtim.tv_nsec,
                          status.st_ctim.tv_sec, status.st_ctim.tv_nsec])
        }
    }
}
