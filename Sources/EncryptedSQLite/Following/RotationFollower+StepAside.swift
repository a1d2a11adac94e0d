import DurableFiles
import Foundation

extension RotationFollower {
    // MARK: Stepping aside while another process replaces the file

    /// At the start of a pooled read, without the writer's lock: when another process is about to
    /// replace the file (an export: encrypting, upgrading, changing cipher settings), closes every
    /// connection, waits until the new file is in place, and opens it (``StepAsideLock``). The
    /// access then runs on the new file; it never reaches the replaced one. Also called by the
    /// ``StepAsideWatcher`` for a database that has no access running.
    /// - Throws: ``EncryptedDatabaseError`` when the new file cannot be opened (as when following
    ///   a rotation made elsewhere).
    func stepAsideIfAsked() throws(EncryptedDatabaseError) {
        guard let stepAside, stepAside.isAsked || steppedAside.withLock({ $0 }) else { return }
        try writer.withLock { () throws(EncryptedDatabaseError) in try stepAsideWithWriterLock() }
    }

    /// With the writer's lock held, at the start of every access that uses the writer: steps aside
    /// when asked, and opens the file again when the writer was left closed (a step aside or a
    /// rotation whose reopening failed: the access then retries it). So no access ever reaches a
    /// closed connection, whichever thread closed it.
    /// - Throws: ``EncryptedDatabaseError`` when the file cannot be opened again.
    func readyWriter(operation: String) throws(EncryptedDatabaseError) {
        try stepAsideWithWriterLock()
        if writer.connection.isClosed { try catchUp(operation: operation) }
    }

    /// ``stepAsideIfAsked()``'s work, with the writer's lock held.
    private func stepAsideWithWriterLock() throws(EncryptedDatabaseError) {
        guard let stepAside else { return }
        if stepAside.isAsked {
            abandonBackgroundRotation(reason: "another process is replacing the file")
            readers?.drain()
            writer.connection.close()
            steppedAside.withLock { $0 = true }
            stepAside.leave()
            logger.notice("stepping aside: another process is replacing the database file", metadata: ["path": "\(path)"])
            stepAside.enter()
        }
        guard steppedAside.withLock({ $0 }) else { return }
        // The writer is closed: `catchUp` opens the file as it is now (rotating it if needed).
        do {
            try catchUp(operation: "stepping aside")
        } catch {
            // Readers keyed with the old key fail, and each access tries to open the file again.
            readers?.resume(keyedWith: ReaderPool.key(for: writer.key, path: path, options: options))
            throw error
        }
        steppedAside.withLock { $0 = false }
        readers?.resume(keyedWith: ReaderPool.key(for: writer.key, path: path, options: options))
    }
}

