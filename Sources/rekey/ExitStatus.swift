import Foundation
import EncryptedSQLite

/// The process exit codes, following sysexits.h.
enum ExitStatus: Int32, CaseIterable, Comparable {
    case success = 0
    case needsRotation = 3
    case keyTooOld = 4
    case usage = 64
    case noKeyOpens = 65
    case missingDatabase = 66
    case cannotCreate = 73
    case ioError = 74
    case busy = 75
    case permission = 77
    case invalidKeys = 78

    var code: Int32 { rawValue }

    /// What the code means, in the words `--help` prints and the rekey guide's "Exit codes" table
    /// shows (``markdownTable``, checked against the guide by `ExitCodeTableTests`): the one place
    /// this wording lives. Code names are in backticks.
    var meaning: String {
        switch self {
        case .success: return "success: rotated, or already on the current key"
        case .needsRotation: return "`--check`: a file is on an older key and needs rotation, or its last write was interrupted and a read-write run (`rekey --db`) must finish it; `keys retire-check`: a file still needs the key (or could not be checked), or a wrapped data key still needs the key-encryption key"
        case .keyTooOld: return "`--check` and `status`: a current key is older than its `max_key_age_days` (make a new key)"
        case .usage: return "usage error (also `decrypt` without `--confirm-plaintext`)"
        case .noKeyOpens: return "no configured key opens the file (or it is empty, too short, plaintext without a plaintext entry, a SQLCipher 4 file, or not a database)"
        case .missingDatabase: return "database file missing"
        case .cannotCreate: return "the output of `decrypt`/`dump --out`/`backup --to`, or a new key file, already exists (it is never overwritten)"
        case .ioError: return "I/O error, disk full or file-size limit, rotation not applied or not verified"
        case .busy: return "the database is locked by another process; try again"
        case .permission: return "permission problem: read-only file or folder; the Keys file, a key file or a folder above them with an untrusted owner or mode"
        case .invalidKeys: return "Keys file missing or invalid, database not listed in it, variable unset"
        }
    }

    /// Every code and its meaning on one line, for `--help`.
    static var documentation: String {
        allCases.map { "\($0.code) \($0.meaning)." }.joined(separator: " ")
    }

    /// The rekey guide's exit-code table (Markdown): one row per code, in order, with its
    /// ``meaning``. `ExitCodeTableTests` checks that `RekeyCommand.md` holds exactly this text.
    static var markdownTable: String {
        let rows = allCases.map { "| \($0.code) | \($0.meaning.replacingOccurrences(of: "|", with: "\\|")) |" }
        return (["| exit | meaning |", "|---|---|"] + rows).joined(separator: "\n") + "\n"
    }

    init(_ error: KeyConfigurationError) {
        switch error {
        case .keyFileTooPermissive, .keyFileUntrusted, .keysFileUntrusted: self = .permission
        default: self = .invalidKeys
        }
    }

    init(_ error: KeyMakingError) {
        switch error {
        case .keysFile(let error): self.init(error)
        case .keyFileExists: self = .cannotCreate
        case .notEdited, .keyFileNameNeeded, .unsupportedFormat: self = .invalidKeys
        case .keyFileNotWritten, .keysFileNotWritten, .keysFileChanged: self = .ioError
        }
    }

    init(_ error: EncryptedDatabaseError) {
        if case .targetExists = error {
            self = .cannotCreate
            return
        }
        switch error.category {
        case .missingFile: self = .missingDatabase
        case .unreadableContent: self = .noKeyOpens
        case .permission: self = .permission
        case .busy: self = .busy
        case .io, .migration, .closed: self = .ioError
        case .keyConfiguration: self = .invalidKeys
        case .needsRotation: self = .needsRotation
        }
    }

    init(_ failure: FleetFailure) {
        switch failure {
        case .keys(let error): self.init(error)
        case .database(let error): self.init(error)
        }
    }

    init(_ error: DatabaseSelectionError) {
        switch error {
        case .nothingSelected, .noDatabases: self = .usage
        case .keysFile(let error): self.init(error)
        }
    }

    /// A `status` outcome: success when the state was read (even when the file needs rotation).
    init(_ outcome: FleetInspectionOutcome) {
        self = outcome.failure.map(ExitStatus.init) ?? .success
    }

    /// The worst status of several files: any failure wins over "needs rotation", which wins
    /// over "key too old", which wins over success; among failures, the first one in this order.
    static func overall(_ statuses: [ExitStatus]) -> ExitStatus {
        if let failure = statuses.first(where: { $0 != .success && $0 != .needsRotation && $0 != .keyTooOld }) { return failure }
        if statuses.contains(.needsRotation) { return .needsRotation }
        return statuses.contains(.keyTooOld) ? .keyTooOld : .success
    }

    static func < (lhs: ExitStatus, rhs: ExitStatus) -> Bool { lhs.rawValue < rhs.rawValue }
}
