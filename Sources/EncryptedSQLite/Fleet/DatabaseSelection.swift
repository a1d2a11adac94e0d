import Foundation
import KeyConfiguration

/// Which databases of a Keys file a fleet run works on: paths named one by one, every database
/// the file names, or both.
///
/// Resolving a selection against a `KeysFile` gives the ``FleetDatabase`` values that
/// ``FleetRotation`` and ``FleetInspection`` run over, in this order:
///
/// 1. the named ``paths``, in the order given, each with its key list — or with the reason it has
///    none: a path the Keys file does not list, or whose key list cannot be built (an unset
///    variable, a key file readable by others), becomes that database's
///    ``FleetFailure/keys(_:)`` failure rather than an error, so the others still run;
/// 2. with ``includesAll``, every other database the file names, in file order: exact paths as
///    written, and the files its glob patterns match now (see `KeysFile/allDatabasePaths()`).
///
/// A selection that resolves to no database at all throws instead (see
/// ``DatabaseSelectionError``).
///
/// ```swift
/// // `rekey status --all`: every database of the Keys file, inspected read-only.
/// let databases = try DatabaseSelection.all.databases(inKeysFileAt: "Keys")
/// let report = FleetInspection(databases: databases).run()
/// for outcome in report.outcomes {
///     switch outcome.result {
///     case .success(let state): print(state.path, state.openedWithKeyID)
///     case .failure(let failure): print(outcome.path, failure.reason)
///     }
/// }
///
/// // `rekey --db app.sqlite`: one file, rotated.
/// let keysFile = try KeysFile.load(path: "Keys")
/// let rotation = FleetRotation(databases: try DatabaseSelection.one("app.sqlite").databases(in: keysFile))
/// ```
public struct DatabaseSelection: Sendable, Equatable {
    /// Database paths named one by one (relative paths are taken from the current directory), in
    /// the order their outcomes are reported.
    public var paths: [String]
    /// `true` to add every database the Keys file names that ``paths`` does not already name.
    public var includesAll: Bool

    /// The databases at `paths`, and with `all` every other database the Keys file names.
    public init(paths: [String] = [], all: Bool = false) {
        self.paths = paths
        self.includesAll = all
    }

    /// One database.
    public static func one(_ path: String) -> DatabaseSelection { DatabaseSelection(paths: [path]) }

    /// Every database the Keys file names.
    public static var all: DatabaseSelection { DatabaseSelection(all: true) }

    /// `true` when nothing is selected: no path, and not ``includesAll``.
    public var isEmpty: Bool { paths.isEmpty && !includesAll }

    /// The selected databases of `keysFile`, each with its key list (or the reason it has none),
    /// named paths first, then the rest of the file's databases for ``includesAll``.
    ///
    /// Key lists are built from `environment` (for `env:` keys) and the key files, now; a key list
    /// that cannot be built is that database's ``FleetDatabase/keys`` failure, never thrown.
    /// - Throws: ``DatabaseSelectionError/nothingSelected`` when ``isEmpty``, and
    ///   ``DatabaseSelectionError/noDatabases(keysFile:)`` when only ``includesAll`` was asked and
    ///   the Keys file names no database (its patterns match no file now).
    public func databases(in keysFile: KeysFile, environment: [String: String]? = nil) throws(DatabaseSelectionError) -> [FleetDatabase] {
        guard !isEmpty else { throw .nothingSelected }
        // Each file once, however it is named (relative, absolute, through a link to its folder):
        // two workers must never rotate the same file at once.
        var seen = Set<String>()
        var selected = paths.filter { seen.insert(KeysFile.canonical($0)).inserted }
        if includesAll {
            selected += keysFile.allDatabasePaths().filter { seen.insert(KeysFile.canonical($0)).inserted }
        }
        // One lookup for the whole selection: each entry's path is resolved once, not once per file.
        let lookup = keysFile.entryLookup()
        let databases = selected.map { FleetDatabase.named($0, in: keysFile, environment: environment, lookup: lookup) }
        guard !databases.isEmpty else { throw .noDatabases(keysFile: keysFile.path) }
        return databases
    }

    /// Loads the Keys file at `keysFilePath` and resolves the selection against it, as
    /// ``databases(in:environment:)`` does.
    ///
    /// When the Keys file cannot be loaded, each named path is returned with that error as its
    /// ``FleetDatabase/keys`` failure (so a run reports them as failed, in order, and a
    /// `--json` consumer still gets one entry per database); ``includesAll`` adds nothing then.
    /// - Throws: ``DatabaseSelectionError/nothingSelected`` when ``isEmpty``;
    ///   ``DatabaseSelectionError/keysFile(_:)`` when the Keys file cannot be loaded and no path is
    ///   named; ``DatabaseSelectionError/noDatabases(keysFile:)`` as for ``databases(in:environment:)``.
    public func databases(inKeysFileAt keysFilePath: String, environment: [String: String]? = nil) throws(DatabaseSelectionError) -> [FleetDatabase] {
        guard !isEmpty else { throw .nothingSelected }
        let keysFile: KeysFile
        do throws(KeyConfigurationError) {
            keysFile = try KeysFile.load(path: keysFilePath)
        } catch {
            guard !paths.isEmpty else { throw .keysFile(error) }
            return paths.map { FleetDatabase(path: $0, keyError: error) }
        }
        return try databases(in: keysFile, environment: environment)
    }
}

/// Why a ``DatabaseSelection`` resolved to no database.
///
/// ```swift
/// do {
///     _ = try DatabaseSelection(paths: []).databases(inKeysFileAt: "Keys")
/// } catch let error as DatabaseSelectionError where error == .nothingSelected {
///     print("name a database or ask for all of them")
/// }
/// ```
public enum DatabaseSelectionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The selection names no path and does not ask for every database.
    case nothingSelected
    /// Every database was asked for, and the Keys file at `keysFile` names none: it has no entry,
    /// or its glob patterns match no file now.
    case noDatabases(keysFile: String)
    /// The Keys file could not be loaded, and no path was named to carry the error.
    case keysFile(KeyConfigurationError)

    /// What happened and what to do (paths and key ids only; never key material).
    public var description: String {
        switch self {
        case .nothingSelected:
            return "no database selected: name at least one database path, or select every database of the Keys file"
        case .noDatabases(let keysFile):
            return "the Keys file \(keysFile) names no database (its patterns match no file); check its paths and glob patterns"
        case .keysFile(let error):
            return error.description
        }
    }
}

extension DatabaseSelectionError: LocalizedError {
    /// The same text as ``description``, so that `localizedDescription` says what happened and what
    /// to do.
    public var errorDescription: String? { description }
}
