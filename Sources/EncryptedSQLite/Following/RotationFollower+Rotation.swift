import KeyConfiguration
import SQLCipherConnection

extension RotationFollower {
    // MARK: Rotating the file here

    /// `EncryptedDatabase.rotateToCurrentKey()`: reads the key list again, ends a background
    /// rotation, and rotates (or follows a rotation made elsewhere) holding the writer's lock.
    /// - Throws: ``EncryptedDatabaseError`` as for opening; on failure the database stays usable
    ///   on its old key.
    func rotateToCurrentKey() throws(EncryptedDatabaseError) -> RotationReport? {
        try writer.withLock { () throws(EncryptedDatabaseError) -> RotationReport? in
            let keys = try source.load(path: path, afterRotationElsewhere: false)
            self.keys.withLock { $0 = keys }
            abandonBackgroundRotation(reason: "rotateToCurrentKey() rotated the file in the foreground")
            return try rotate(keys: keys, fallbackReason: nil)
        }
    }

    /// With the writer's lock held and `keys` read: follows a rotation made elsewhere, or rotates
    /// the file to `keys.current` with the ``RotationPlan``. `fallbackReason` is recorded in the
    /// report of a background rotation that fell back to it.
    /// - Returns: the rotation, or `nil` when the file was already on the current key.
    /// - Throws: ``EncryptedDatabaseError``; the writer is then reopened on its old key. When
    ///   ``OpenOptions/prepareConnection`` throws on the rotated writer, the rotation stands and
    ///   its error is thrown.
    func rotate(keys: KeyList, fallbackReason: String?) throws(EncryptedDatabaseError) -> RotationReport? {
        if !writerReadsFile {
            // Another process rotated the file: follow it (which rotates if still needed).
            try catchUp(operation: "rotateToCurrentKey")
            return writer.report.rotation
        }
        guard !keys.isCurrent(writer.key) else { return nil }
        readers?.drain()
        // Rotate on the connection as the open's rotation gets it: without the setup's foreign keys.
        try? writer.connection.execute("PRAGMA foreign_keys = OFF")
        let (rotated, plain): (Connection, RotationReport)
        do {
            (rotated, plain) = try DatabaseOpener(path: path, keys: keys, options: options, stepAside: stepAside).rotate(writer.connection, from: writer.key)
        } catch {
            readers?.resume(keyedWith: ReaderPool.key(for: writer.key, path: path, options: options))
            if case .changedByAnotherProcess = error {
                try catchUp(operation: "rotateToCurrentKey")
                return writer.report.rotation
            }
            // The rotation closed the writer; reopen it on the old key, which still opens the file.
            reopenWriterAfterFailure(always: true)
            throw error
        }
        var rotation = plain
        rotation.fallbackReason = fallbackReason
        writer.swap(to: rotated, key: keys.current, report: writer.report.with(rotation: rotation))
        readers?.resume(keyedWith: ReaderPool.key(for: keys.current, path: path, options: options))
        try setup.runOnWriter(rotated, path: path)
        return rotation
    }
}
