import SQLCipherConnection

/// One way of rewriting a database for a new key: the protocol every rotation strategy
/// implements (page re-encryption, the engine's rekey, the export path).
///
/// A strategy gets the connection that opened the file with the old key and a
/// ``RotationContext`` (the file, both keys, the options, the shared steps). It either rotates the
/// file — verified, with the connection closed and a new one keyed with the new key returned — or
/// declines before it changed anything, handing the connection back so that the next strategy of
/// the ``RotationPlan`` can run. On a thrown error nothing is lost: the file is on the old key
/// unless the error says otherwise.
///
/// How the strategies keep a file safe is explained once, in the Key Rotation article.
protocol Rotation {
    /// How this strategy rewrites the file, as reported in ``RotationReport/method``.
    var method: RotationMethod { get }

    /// Rotates the file `connection` has open (keyed with `context.from`) to `context.to`.
    /// - Throws: ``EncryptedDatabaseError``.
    func rotate(_ connection: Connection, in context: RotationContext) throws(EncryptedDatabaseError) -> RotationResult
}

/// What a ``Rotation`` did.
enum RotationResult {
    /// The file is on the new key; the connection is keyed with it and verified.
    case rotated(Connection, RotationReport)
    /// Nothing was changed; the connection is the one that was passed in, still usable.
    case declined(Connection, reason: String)
}
