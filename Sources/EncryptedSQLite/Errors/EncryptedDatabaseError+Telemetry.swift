import CipherFormats

extension EncryptedDatabaseError {
    /// Adds this error to the metrics it belongs to (see `Telemetry`): a busy wait that timed out
    /// during `operation`, a failed verification.
    func count(_ operation: String) {
        if case .verificationFailed(_, let keyID, _) = self { Telemetry.verificationFailed(keyID: keyID) }
        if category == .busy { Telemetry.busy(operation: operation) }
    }
}
