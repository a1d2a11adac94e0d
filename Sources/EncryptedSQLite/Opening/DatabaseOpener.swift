import CipherFormats
import DurableFiles
import KeyConfiguration
import SQLCipherConnection

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
    /// The opening database's part in the step-aside protocol, for a rotation that replaces the file.
    var stepAside: StepAsideLock? = nil

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
        let trial = KeyedConnections(path: path, access: options.readOnly ? .readOnly : .readWrite, busyTimeout: options.busyTimeout)
        let outcome = try KeyProbe(keys: keys, trial: trial).run()
        options.logger.info("opened database", metadata: [
            "path": "\(path)", "key": "\(outcome.key.id)", "attempts": "\(outcome.attempts.count)",
        ])
        var connection = outcome.connection
        var key = outcome.key
        var rotation: RotationReport?
        let inCurrentFormat = outcome.key.id != keys.currentID || keys.isCurrent(outcome.key)
        if !keys.isCurrent(outcome.key) {
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
            created: created, rotation: rotation, totalDuration: stopwatch.elapsed, openedInCurrentFormat: inCurrentFormat)
        Telemetry.opened(outcome: rotation != nil ? "rotated" : report.isOnCurrentKey ? "current" : "needs_rotation", keysTried: outcome.attempts.count, duration: report.totalDuration)
        return Opened(connection: connection, report: report, key: key)
    }

    /// Rotates an open connection that is keyed with `from` to the current key, with the
    /// strategies the ``RotationPlan`` chooses.
    func rotate(_ connection: Connection, from: ResolvedKey) throws(EncryptedDatabaseError) -> (Connection, RotationReport) {
        if options.readOnly {
            throw .rotationNeeded(path: path, openedWith: from.id, currentKeyID: keys.currentID)
        }
        // A list in the wrong order rotates files backwards. A `KeyList` refuses dated keys out
        // of order, so this is the last guard (the file's key may come from elsewhere).
        if let fileKeyCreated = from.created, let currentCreated = keys.current.created, currentCreated < fileKeyCreated {
            options.logger.warning("rotating to a key older than the one the file is on; list keys oldest first", metadata: [
                "path": "\(path)", "from": "\(from.id)", "fromCreated": "\(KeyCreationDate.text(of: fileKeyCreated))",
                "to": "\(keys.currentID)", "toCreated": "\(KeyCreationDate.text(of: currentCreated))",
            ])
        }
        let context = RotationContext(
            path: path, from: from, to: keys.current, busyTimeout: options.busyTimeout, verification: options.verification,
            logger: options.logger, files: options.files, workers: options.rotationThreads, stepAside: stepAside)
        let rotated = try Telemetry.span("rotate", ["db.path": path, "from_key": from.id, "to_key": keys.currentID, "strategy": "\(options.rotationStrategy)"], failure: { $0.count("rotate") }) { () throws(EncryptedDatabaseError) in
            try RotationPlan(from: from, to: keys.current, strategy: options.rotationStrategy).run(connection, in: context)
        }
        Telemetry.rotated(method: rotated.1.method.rawValue, fromKey: from.id, toKey: keys.currentID, bytes: rotated.1.bytes, duration: rotated.1.totalDuration)
        return rotated
    }

    /// Which key opens the file, without writing anything or leaving side files behind.
    func check() throws(EncryptedDatabaseError) -> KeyCheck {
        let trial = KeyedConnections.forInspection(path: path, busyTimeout: options.busyTimeout)
        let outcome = try KeyProbe(keys: keys, trial: trial).run()
        outcome.connection.close()
        return KeyCheck(path: path, openedWithKeyID: outcome.key.id, currentKeyID: keys.currentID, attempts: outcome.attempts,
                        needsRotation: !keys.isCurrent(outcome.key))
    }
}
