import Foundation
import KeyConfiguration
import SQLCipherConnection

extension EncryptedDatabase {
    // MARK: Rotation

    /// Rotates the file to the current key if it is not on it yet (for databases opened with
    /// ``OpenOptions/rotateToCurrentKey`` off, or to rotate a running process's file after a key
    /// was appended to its Keys file or provider).
    ///
    /// Reads the key list again first (from the Keys file or provider the database was opened
    /// with). Holds the writer and drains the reader pool: readers in use finish, all readers are
    /// closed, and after the rotation they reopen keyed with the new key only. Other processes
    /// that have the file open follow the rotation by themselves. When another process rotated the
    /// file meanwhile, this one follows that rotation instead (rotating further only if the file
    /// is still not on the current key).
    /// - Returns: the rotation, or `nil` when the file was already on the current key (or another
    ///   process rotated it).
    /// - Throws: ``EncryptedDatabaseError`` as for opening; on failure the database stays usable
    ///   on its old key. When ``OpenOptions/prepareConnection`` throws on the rotated writer, the
    ///   rotation stands and its error is thrown.
    @discardableResult
    public func rotateToCurrentKey() throws(EncryptedDatabaseError) -> RotationReport? {
        writerLock.lock()
        defer { writerLock.unlock() }
        let keys = try source.load(path: path, afterRotationElsewhere: false)
        keysLock.withLock { currentKeys = keys }
        abandonBackgroundRotation(reason: "rotateToCurrentKey() rotated the file in the foreground")
        return try rotateWithWriterLock(keys: keys, fallbackReason: nil)
    }

    /// ``rotateToCurrentKey()``'s work, with `writerLock` held and `keys` read: follows a
    /// rotation made elsewhere, or rotates the file to `keys.current` with the ``RotationPlan``.
    /// `fallbackReason` is recorded in the report of a background rotation that fell back to it.
    func rotateWithWriterLock(keys: KeyList, fallbackReason: String?) throws(EncryptedDatabaseError) -> RotationReport? {
        if !writerReadsFile {
            // Another process rotated the file: follow it (which rotates if still needed).
            try catchUp(operation: "rotateToCurrentKey")
            return currentReport.rotation
        }
        guard !keys.isCurrent(writerKey) else { return nil }
        readers?.drain()
        // Rotate on the connection as the open's rotation gets it: without the setup's foreign keys.
        try? writer.execute("PRAGMA foreign_keys = OFF")
        let (rotated, plain): (Connection, RotationReport)
        do {
            (rotated, plain) = try DatabaseOpener(path: path, keys: keys, options: options, stepAside: stepAside).rotate(writer, from: writerKey)
        } catch {
            readers?.resume(keyedWith: Self.readerKey(for: writerKey, path: path, options: options))
            if case .changedByAnotherProcess = error {
                try catchUp(operation: "rotateToCurrentKey")
                return currentReport.rotation
            }
            // The rotation closed the writer; reopen it on the old key, which still opens the file.
            if let reopened = try? KeyTrial(path: path, access: .readWrite, busyTimeout: options.busyTimeout).open(with: writerKey) {
                try? setup.run(on: reopened)
                writer = reopened
            }
            throw error
        }
        var rotation = plain
        rotation.fallbackReason = fallbackReason
        writer = rotated
        writerKey = keys.current
        currentReport = currentReport.with(rotation: rotation)
        readers?.resume(keyedWith: Self.readerKey(for: writerKey, path: path, options: options))
        try setup.runOnWriter(rotated, path: path)
        return rotation
    }
}
