import Foundation

extension EncryptedDatabase {
    /// Closes the database: new calls fail with ``EncryptedDatabaseError/closed(path:)``; the
    /// async work already queued (writes, reads waiting for a connection) runs; a background
    /// rotation that is copying is cancelled (the file stays on the key it is on, and the next
    /// open rotates it) and waited for; then the writer and every pooled reader are closed, after
    /// the calls in progress on them return. Without it, connections close when the last
    /// reference to the database goes, which a task still holding it can delay indefinitely.
    ///
    /// ```swift
    /// // A service's shutdown (swift-service-lifecycle, Vapor's shutdown hook):
    /// await database.close()
    /// ```
    ///
    /// Calling it again waits for nothing and returns.
    public func close() async {
        guard beginClosing() else { return }
        // The rotation is told first: its copy stops at its next step while the queued work runs.
        let rotation = cancelBackgroundRotation()
        // Every write queued before the flag was set is on the serial writer queue, and every
        // async read waiting for a pooled reader is blocking work of the database: a barrier
        // behind the one and a drain of the other wait for them.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            writer.executor.async { continuation.resume() }
        }
        await queue.drained()
        if let rotation { _ = try? await rotation.result() }
        closeConnections()
        leaveStepAsideProtocol()
    }

    /// ``close()`` for code that is not async: blocks the calling thread until the database is
    /// closed. Unavailable from async code (`noasync`), where `await close()` waits suspended.
    @available(*, noasync, message: "in async code, call `await close()`")
    public func close() {
        guard beginClosing() else { return }
        let rotation = cancelBackgroundRotation()
        // On the writer's queue already (a task on `writerExecutor`), the work queued before
        // this runs after it returns; waiting for it here would never end.
        if !writer.executor.isCurrent { writer.queue.sync {} }
        queue.waitUntilDrained()
        rotation?.waitUntilEnded()
        closeConnections()
        leaveStepAsideProtocol()
    }

    /// Gives up this database's presence in the lock file, so that a process replacing the file
    /// (`rekey`) does not wait for a database that is closed. The lock file's descriptor stays
    /// open until the database goes: closing it would drop the locks every other database of this
    /// process holds on that file.
    private func leaveStepAsideProtocol() {
        follower.stepAside?.leave()
    }

    /// Cancels the background rotation that is still running, and returns it to be waited for.
    private func cancelBackgroundRotation() -> BackgroundRotation? {
        guard let rotation = backgroundRotation, !rotation.state.isFinal else { return nil }
        rotation.cancel()
        return rotation
    }

    /// `true` for the first call: the database is closing from now on.
    private func beginClosing() -> Bool {
        closing.withLock { closing in
            defer { closing = true }
            return !closing
        }
    }

    /// Closes every connection, waiting for the calls in progress on them (the database's
    /// `deinit` too; closing twice does nothing more).
    func closeConnections() {
        StepAsideWatcher.shared.forget(ObjectIdentifier(follower))
        readers?.close()
        writer.shutDown()
    }

    /// Throws ``EncryptedDatabaseError/closed(path:)`` once ``close()`` was called.
    func checkOpen() throws(EncryptedDatabaseError) {
        if closing.withLock({ $0 }) { throw .closed(path: path) }
    }
}
