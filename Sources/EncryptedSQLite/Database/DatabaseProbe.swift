/// What ``EncryptedDatabase/probe(waitingAtMost:)`` found: whether the open database answers a
/// read now, on which key, and whether a rotation is due or running. Cheap enough for a probe
/// endpoint called every second: one read of the schema page on a connection that is already
/// open, never a scan of the file (``DatabaseHealth`` reads every page) and never a key derivation.
///
/// ```swift
/// let probe = await database.probe()
/// return probe.isHealthy ? .ok : .serviceUnavailable   // JSON: try JSONEncoder().encode(probe)
/// ```
///
/// It holds no key material, and its `detail` is an error's description, which never does either.
public struct DatabaseProbe: Sendable, Equatable, Codable {
    /// How the read went.
    public enum Status: String, Sendable, Codable {
        /// A connection read the schema page with the database's key.
        case ok
        /// No connection was free within the probe's limit: a rotation, a migration or long
        /// writes hold the database. It is working, not broken; `detail` says what waited.
        case busy
        /// The read failed: `detail` has the error's description.
        case failed
        /// The database was closed (``EncryptedDatabase/close()``).
        case closed
    }

    /// The database path.
    public let path: String
    /// How the read went.
    public let status: Status
    /// Why the status is not ``Status/ok``, or `nil`.
    public let detail: String?
    /// The id of the key the file is on now.
    public let keyID: String
    /// The id of the current key of the database's key list.
    public let currentKeyID: String
    /// A background rotation is copying the file now.
    public let rotatingInBackground: Bool
    /// How long the probe took, in milliseconds.
    public let milliseconds: Double

    /// `true` when the read succeeded.
    public var isHealthy: Bool { status == .ok }
    /// `true` when the file is not on the current key yet (a rotation is due or running).
    public var needsRotation: Bool { keyID != currentKeyID }
}
