import EncryptedSQLite

/// What happened to one database in this run, as the CLI prints it.
struct DatabaseOutcome {
    let path: String
    let result: FleetResult

    init(_ outcome: FleetOutcome) {
        path = outcome.path
        result = outcome.result
    }

    var status: ExitStatus {
        switch result {
        case .rotated, .alreadyCurrent: return .success
        case .checked(let check): return check.needsRotation ? .needsRotation : .success
        case .failed(let failure): return ExitStatus(failure)
        }
    }
}
