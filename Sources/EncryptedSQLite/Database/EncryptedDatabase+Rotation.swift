extension EncryptedDatabase {
    // MARK: Rotation

    /// Rotates the file to the current key if it is not on it yet (for databases opened with
    /// ``OpenOptions/rotateToCurrentKey`` off, or to rotate a running process's file after a key
    /// was appended to its Keys file or provider).
    ///
    /// ```swift
    /// if let rotation = try database.rotateToCurrentKey() {
    ///     print("rotated from \(rotation.fromKeyID) to \(rotation.toKeyID)")
    /// }
    /// ```
    ///
    /// Reads the key list again first (from the Keys file or provider the database was opened
    /// with). Holds the writer and drains the reader pool: readers in use finish, all readers are
    /// closed, and after the rotation they reopen keyed with the new key only. Other processes
    /// that have the file open follow the rotation by themselves. When another process rotated the
    /// file meanwhile, this one follows that rotation instead (rotating further only if the file
    /// is still not on the current key). A background rotation running is abandoned.
    /// - Returns: the rotation, or `nil` when the file was already on the current key (or another
    ///   process rotated it).
    /// - Throws: ``EncryptedDatabaseError`` as for opening; on failure the database stays usable
    ///   on its old key. When ``OpenOptions/prepareConnection`` throws on the rotated writer, the
    ///   rotation stands and its error is thrown.
    @discardableResult
    public func rotateToCurrentKey() throws(EncryptedDatabaseError) -> RotationReport? {
        try checkOpen()
        return try follower.rotateToCurrentKey()
    }

    /// ``rotateToCurrentKey()`` for Swift concurrency: the rotation runs on a thread of the
    /// database's own, and the task waits suspended, so no thread of the cooperative pool is held
    /// for the whole rewrite.
    ///
    /// ```swift
    /// let rotation = try await database.rotateToCurrentKey()
    /// ```
    /// - Throws: as ``rotateToCurrentKey()``.
    @discardableResult
    public func rotateToCurrentKey() async throws(EncryptedDatabaseError) -> RotationReport? {
        try checkOpen()
        let result: Result<RotationReport?, EncryptedDatabaseError> = await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: Result { () throws(EncryptedDatabaseError) in try self.follower.rotateToCurrentKey() }) }
        }
        return try result.get()
    }

    /// The rotation running (or last run) in the background: started by the open with
    /// ``OpenOptions/backgroundRotation``, or by ``rotateInBackground()``; `nil` when none was.
    public var backgroundRotation: BackgroundRotation? { follower.backgroundSlot.rotation }

    /// Rotates the file to the current key in the background while the database serves (as
    /// ``OpenOptions/backgroundRotation`` does at the open): for a running service after a key
    /// was appended to its Keys file or provider.
    ///
    /// ```swift
    /// if let rotation = try database.rotateInBackground() {
    ///     let report = try await rotation.result()
    /// }
    /// ```
    ///
    /// Reads the key list again first. Returns the rotation already running if there is one. The
    /// rotation keeps the database open until it ends.
    /// - Returns: the rotation, or `nil` when the file is already on the current key.
    /// - Throws: ``EncryptedDatabaseError/keyUnavailable(path:reason:)`` when the key list cannot
    ///   be read again. Failures of the rotation itself are reported by the returned
    ///   ``BackgroundRotation``.
    @discardableResult
    public func rotateInBackground() throws(EncryptedDatabaseError) -> BackgroundRotation? {
        try checkOpen()
        return try follower.rotateInBackground(owner: self)
    }
}
