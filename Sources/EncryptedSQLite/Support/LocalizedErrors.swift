import Foundation

// Every public error type reports its own description as its `localizedDescription`, so that code
// showing `error.localizedDescription` (the usual Foundation idiom) shows what happened and what to
// do, instead of "The operation could not be completed". Descriptions never contain key material.

extension EncryptedDatabaseError: LocalizedError {
    /// The same text as ``description``.
    public var errorDescription: String? { description }
}

extension KeyConfigurationError: LocalizedError {
    /// The same text as ``description``.
    public var errorDescription: String? { description }
}

extension KeyMaterialProblem: LocalizedError {
    /// The same text as ``description``.
    public var errorDescription: String? { description }
}

extension MigrationError: LocalizedError {
    /// The same text as ``description``.
    public var errorDescription: String? { description }
}

extension SQLiteError: LocalizedError {
    /// The same text as ``description``.
    public var errorDescription: String? { description }
}

extension StatementError: LocalizedError {
    /// The same text as ``description``.
    public var errorDescription: String? { description }
}

extension FleetFailure: LocalizedError {
    /// The same text as ``description``.
    public var errorDescription: String? { description }
}

extension RecordError: LocalizedError {
    /// The same text as ``description``.
    public var errorDescription: String? { description }
}
