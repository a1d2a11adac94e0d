import KeyConfiguration

/// Where a database gets its key list: read at open, and read again whenever the database finds
/// its file rotated by another process (so a key appended to the Keys file after the process
/// started is found without a restart).
struct KeyListSource: Sendable {
    /// How errors name the source: "the Keys file /srv/Keys", "the key provider".
    let name: String
    /// `false` for a list given once: reading it again gives the same list.
    let canChange: Bool
    private let read: @Sendable () throws -> KeyList

    /// A list given once (`EncryptedDatabase(path:keys:)`).
    static func fixed(_ keys: KeyList) -> KeyListSource {
        KeyListSource(name: "the key list given when the database was opened", canChange: false, read: { keys })
    }

    /// The entry for `database` in the Keys file at `keysFile`, read from disk each time.
    static func keysFile(_ keysFile: String, database: String) -> KeyListSource {
        KeyListSource(name: "the Keys file \(keysFile)", canChange: true, read: {
            try KeysFile.load(path: keysFile).keyList(forDatabase: database)
        })
    }

    /// Whatever `provider` returns each time it is called.
    static func provider(_ provider: @escaping @Sendable () throws -> KeyList) -> KeyListSource {
        KeyListSource(name: "the key provider", canChange: true, read: provider)
    }

    /// Reads the list for the database at `path`. `afterRotationElsewhere` says the file was found
    /// rotated by another process while this one had it open, which the error then explains.
    /// - Throws: ``EncryptedDatabaseError/keyUnavailable(path:reason:)``.
    func load(path: String, afterRotationElsewhere: Bool) throws(EncryptedDatabaseError) -> KeyList {
        do {
            return try read()
        } catch {
            var reason = "its key list could not be read from \(name): \(error)"
            if afterRotationElsewhere {
                reason = "another process rotated the file while this process had it open, and " + reason
            }
            if case .environmentVariableUnset(let variable, _, _) = error as? KeyConfigurationError {
                reason += ". A process sees only the environment it was started with: a variable set after it started (here \(variable)) is invisible to it. Keep keys in key files (file:) or give a key provider, so running processes can follow rotations; or restart the process with the variable set"
            }
            throw .keyUnavailable(path: path, reason: reason + ". Nothing was changed.")
        }
    }
}
