import Foundation
import KeyConfiguration

/// Where one file stands in a ``KeyRetirement`` check.
///
/// ```swift
/// let stillOnIt = report.findings.filter { $0.status == .onRetiringKey }
/// ```
public enum KeyRetirementStatus: String, Sendable, Codable {
    /// The file opens with another key: it no longer needs the key being retired.
    case onOtherKey
    /// The file opens with the key being retired only: rotate it before dropping the key.
    case onRetiringKey
    /// The key being retired is this file's current key: make and roll out a newer key first.
    case retiringKeyIsCurrent
    /// The file could not be checked (missing, no key opens it, not covered by the Keys file, …):
    /// it may still need the key.
    case unknown
}

/// One file of a ``KeyRetirement`` check.
///
/// ```swift
/// for finding in report.blocking {
///     print("\(finding.path): \(finding.status.rawValue)")
/// }
/// ```
public struct KeyRetirementFinding: Sendable, Codable, Equatable {
    /// The file's path.
    public let path: String
    /// Where it stands.
    public let status: KeyRetirementStatus
    /// The key that opens it (`nil` when it could not be checked).
    public let openedWithKeyID: String?
    /// Why it could not be checked (``KeyRetirementStatus/unknown`` only).
    public let problem: String?
}

/// The result of a ``KeyRetirement`` check.
///
/// ```swift
/// let report = KeyRetirement(keyID: "2024-01", databases: FleetDatabase.all(in: keysFile)).run()
/// print(report.canRetire ? "2024-01 can go" : "\(report.blocking.count) files still need 2024-01")
/// ```
public struct KeyRetirementReport: Sendable, Codable, Equatable {
    /// The key id checked.
    public let keyID: String
    /// Every file, in the order given.
    public let findings: [KeyRetirementFinding]

    /// The files that still need the key, or may (every finding but ``KeyRetirementStatus/onOtherKey``).
    public var blocking: [KeyRetirementFinding] { findings.filter { $0.status != .onOtherKey } }
    /// `true` when no file needs the key any more: it can be dropped from the Keys file and its
    /// material destroyed.
    public var canRetire: Bool { blocking.isEmpty }
}

/// Lists every database (and backup) that still needs a key, so that a script drops the key only
/// when nothing is left on it.
///
/// Each file is checked the cheapest way, as ``EncryptedDatabase/check(path:keys:busyTimeout:)``
/// does: read-only, the current key first (one attempt for a file that was rotated), then the
/// older keys. Nothing is written. A file that cannot be checked counts against retiring, and so
/// does a file whose current key is the one being retired.
///
/// ```swift
/// let keysFile = try KeysFile.load(path: "Keys")
/// var files = FleetDatabase.all(in: keysFile)                       // the databases, backups included
/// files += KeyRetirement.files(matching: "/backups/*.sqlite", in: keysFile)
/// let report = KeyRetirement(keyID: "2024-01", databases: files).run()
/// if report.canRetire { print("no file needs 2024-01 any more") }
/// ```
public struct KeyRetirement: Sendable {
    /// The key id to retire.
    public let keyID: String
    /// The files to check, in the order reported.
    public let databases: [FleetDatabase]
    /// How many files are checked at once (within ``FleetLimits/jobs``).
    public let jobs: Int
    /// How long to wait for another process's lock on each file.
    public let busyTimeout: Duration

    /// A check of `databases` for `keyID`.
    public init(keyID: String, databases: [FleetDatabase], jobs: Int = 2, busyTimeout: Duration = .seconds(5)) {
        self.keyID = keyID
        self.databases = databases
        self.jobs = min(max(FleetLimits.jobs.lowerBound, jobs), FleetLimits.jobs.upperBound)
        self.busyTimeout = busyTimeout
    }

    /// The files matching the glob `pattern` now (a relative pattern is taken from the working
    /// directory; hidden temporaries and SQLite side files excluded), each with its key list from
    /// `keysFile` — or, for a file the Keys file does not cover, that error: such a file would not
    /// be rotated by `rekey --all`, so it counts as not checked.
    public static func files(matching pattern: String, in keysFile: KeysFile, environment: [String: String] = ProcessInfo.processInfo.environment) -> [FleetDatabase] {
        let absolute = pattern.hasPrefix("/") ? pattern : FileManager.default.currentDirectoryPath + "/" + pattern
        return KeysFile.expandPattern(absolute).map { FleetDatabase.named($0, in: keysFile, environment: environment) }
    }

    /// Checks every file.
    public func run() -> KeyRetirementReport {
        let run = FleetWorkers(paths: databases.map(\.path), jobs: jobs).run(
            isFailure: { $0.status == .unknown },
            work: { [self] index, _ in check(databases[index]) },
            progress: { _, _ in })
        return KeyRetirementReport(keyID: keyID, findings: run.outcomes)
    }

    private func check(_ database: FleetDatabase) -> KeyRetirementFinding {
        let keys: KeyList
        switch database.keys {
        case .failure(let error):
            return KeyRetirementFinding(path: database.path, status: .unknown, openedWithKeyID: nil, problem: error.description)
        case .success(let list):
            keys = list
        }
        do {
            let check = try EncryptedDatabase.check(path: database.path, keys: keys, busyTimeout: busyTimeout)
            let status: KeyRetirementStatus
            if keys.currentID == keyID {
                status = .retiringKeyIsCurrent
            } else {
                status = check.openedWithKeyID == keyID ? .onRetiringKey : .onOtherKey
            }
            return KeyRetirementFinding(path: database.path, status: status, openedWithKeyID: check.openedWithKeyID, problem: nil)
        } catch {
            return KeyRetirementFinding(path: database.path, status: .unknown, openedWithKeyID: nil, problem: error.description)
        }
    }
}
