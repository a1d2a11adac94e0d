import SQLCipherConnection
import CipherFormats
import KeyConfiguration

/// The open sequence shared by every way of opening a database: create the file when allowed,
/// find the key that opens it, and rotate it to the current key when an older key opened it.
struct DatabaseOpener {
    /// A verified connection on the file, and what it took to get it.
    struct Opened {
        let connection: Connection
        let report: OpenReport
        /// The key the connection is keyed with now.
        let key: ResolvedKey
    }

    let path: String
    let keys: KeyList
    let options: OpenOptions

    func open() throws(EncryptedDatabaseError) -> Opened {
        let stopwatch = Stopwatch()
        var created = false
        if !options.readOnly {
            let removed = RotationTemporaries.removeStale(of: path, files: options.files)
            if !removed.isEmpty {
                options.logger.notice("removed temporaries of an interrupted rotation", metadata: ["path": "\(path)", "files": "\(removed.count)"])
            }
        }
        if options.createIfMissing, !options.readOnly, case .missing = DatabaseFileKind.inspect(path: path) {
            created = try DatabaseCreation(path: path, key: keys.current, busyTimeout: options.busyTimeout, logger: options.logger, files: options.files).run()
        }
        let trial = KeyTrial(path: path, access: options.readOnly ? .readOnly : .readWrite, busyTimeout: options.busyTimeout)
        let outcome = try KeyProbe(keys: keys, trial: trial).run()
        options.logger.info("opened database", metadata: [
            "path": "\(path)", "key": "\(outcome.key.id)", "attempts": "\(outcome.attempts.count)",
        ])
        var connection = outcome.connection
        var key = outcome.key
        var rotation: RotationReport?
        if outcome.key.id != keys.currentID {
            if options.readOnly {
                throw .rotationNeeded(path: path, openedWith: outcome.key.id, currentKeyID: keys.currentID)
            }
            if options.rotateToCurrentKey {
                (connection, rotation) = try rotate(connection, from: outcome.key)
                key = keys.current
            }
        }
        let report = OpenReport(
            path: path, openedWithKeyID: outcome.key.id, currentKeyID: keys.currentID, attempts: outcome.attempts,
            created: created, rotation: rotation, totalDuration: stopwatch.elapsed)
        return Opened(connection: connection, report: report, key: key)
    }

    /// Rotates an open connection that is keyed with `from` to the current key.
    func rotate(_ connection: Connection, from: ResolvedKey) throws(EncryptedDatabaseError) -> (Connection, RotationReport) {
        if options.readOnly {
            throw .rotationNeeded(path: path, openedWith: from.id, currentKeyID: keys.currentID)
        }
        if Self.needsExport(from: from, to: keys.current) {
            return try ExportRotation(path: path, busyTimeout: options.busyTimeout, verification: options.verification, logger: options.logger, files: options.files)
                .run(connection: connection, from: from, to: keys.current)
        }
        var connection = connection
        if options.rotationStrategy == .automatic {
            let pages = PageReencryption(path: path, busyTimeout: options.busyTimeout, verification: options.verification, logger: options.logger,
                                         files: options.files, workers: min(max(1, options.rotationThreads), OpenOptions.maximumRotationThreads))
            switch try pages.run(connection: connection, from: from, to: keys.current) {
            case .rotated(let rotated, let report):
                return (rotated, report)
            case .notApplicable(let unchanged, let reason):
                options.logger.info("rotating with the engine's rekey", metadata: ["path": "\(path)", "reason": "\(reason)"])
                connection = unchanged
            }
        }
        return try rotator().run(connection: connection, from: from, to: keys.current)
    }

    /// How a rotation from `from` to `to` will rewrite the file with `strategy`. (A WAL-mode file
    /// that another connection has open, or a file with a leftover journal, is rotated with the
    /// engine's rekey instead of the planned page re-encryption; that shows only when it runs.)
    static func plannedMethod(from: ResolvedKey, to: ResolvedKey, strategy: RotationStrategy) -> RotationMethod {
        if needsExport(from: from, to: to) { return .export }
        guard strategy == .automatic, SQLCipherEngine.linked.writesVersion3Pages, SQLCipher3PageFormat(settings: from.cipher) != nil else {
            return .inPlace
        }
        return .pageReencryption
    }

    /// A plaintext file, a legacy (SQLCipher 1.x/2.x) file, or a change of page size, KDF
    /// iterations or HMAC needs the export path: an in-place rekey keeps the file's settings
    /// (and does nothing at all for a plaintext file).
    static func needsExport(from: ResolvedKey, to: ResolvedKey) -> Bool {
        from.isPlaintext || !from.writesSameFormat(as: to)
    }

    /// Which key opens the file, without writing anything.
    func check() throws(EncryptedDatabaseError) -> KeyCheck {
        let trial = KeyTrial(path: path, access: .readOnly, busyTimeout: options.busyTimeout)
        let outcome = try KeyProbe(keys: keys, trial: trial).run()
        outcome.connection.close()
        return KeyCheck(path: path, openedWithKeyID: outcome.key.id, currentKeyID: keys.currentID, attempts: outcome.attempts)
    }

    private func rotator() -> InPlaceRotation {
        InPlaceRotation(path: path, busyTimeout: options.busyTimeout, verification: options.verification, logger: options.logger)
    }
}
