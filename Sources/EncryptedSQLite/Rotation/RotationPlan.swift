import CipherFormats
import KeyConfiguration
import SQLCipherConnection

/// Which strategies rotate a file from one key to another, chosen once, in this one place.
///
/// - A plaintext file, a legacy (SQLCipher 1.x/2.x) file, or a change of cipher settings needs
///   the export path: an in-place rewrite keeps the file's settings (and does nothing at all for
///   a plaintext file).
/// - A key-only change of a file in a page format the library can rewrite itself uses page
///   re-encryption (with ``RotationStrategy/automatic``), and falls back to the engine's rekey
///   when page re-encryption declines at run time (another connection holds the WAL-mode file or
///   put the file in WAL mode meanwhile, a journal is present, page 1 does not authenticate with
///   the library's derivation).
/// - Otherwise, the engine's rekey.
struct RotationPlan {
    /// The strategies to try, in order; each runs only if the one before declined.
    let rotations: [any Rotation]

    init(from: ResolvedKey, to: ResolvedKey, strategy: RotationStrategy) {
        if from.isPlaintext || !from.writesSameFormat(as: to) {
            rotations = [ExportRotation()]
        } else if strategy == .automatic, let format = PageFormat(settings: from.cipher), format.supportsPageReencryption {
            rotations = [PageReencryption(format: format), EngineRekey()]
        } else {
            rotations = [EngineRekey()]
        }
    }

    /// How the file will be rewritten when no strategy declines.
    var method: RotationMethod { rotations[0].method }

    /// Runs the strategies in order until one rotates the file.
    /// - Throws: ``EncryptedDatabaseError``.
    func run(_ connection: Connection, in context: RotationContext) throws(EncryptedDatabaseError) -> (Connection, RotationReport) {
        var connection = connection
        for rotation in rotations {
            switch try rotation.rotate(connection, in: context) {
            case .rotated(let rotated, let report):
                return (rotated, report)
            case .declined(let unchanged, let reason):
                context.logger.info("rotation strategy declined", metadata: [
                    "path": "\(context.path)", "strategy": "\(rotation.method.rawValue)", "reason": "\(reason)",
                ])
                connection = unchanged
            }
        }
        // The engine's rekey and the export never decline.
        connection.close()
        throw .rotationNotApplied(path: context.path, fromKeyID: context.from.id, toKeyID: context.to.id, detail: "no rotation strategy applies")
    }
}
