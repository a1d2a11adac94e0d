import KeyConfiguration

extension EncryptedDatabase {
    // MARK: Finds which key opens a file

    /// Finds which key opens a file and whether it needs rotation, without writing anything, and
    /// leaves the file's folder as it found it (no `-wal`/`-shm` left behind on a WAL-mode file;
    /// see ``DatabaseInspection``).
    /// - Throws: ``EncryptedDatabaseError`` as for opening (except rotation errors).
    public static func check(path: String, keys: KeyList, busyTimeout: Duration = .seconds(5)) throws(EncryptedDatabaseError) -> KeyCheck {
        try RotationRetryingOpen(path: path, source: .fixed(keys), options: OpenOptions(busyTimeout: busyTimeout)).check()
    }
}
