import EncryptedSQLite

/// What happened to one database in this run.
struct DatabaseOutcome {
    enum Failure {
        case keys(KeyConfigurationError)
        case database(EncryptedDatabaseError)

        var message: String {
            switch self {
            case .keys(let error): return error.description
            case .database(let error): return error.description
            }
        }
    }

    enum Result {
        case rotated(OpenReport)
        case alreadyCurrent(OpenReport)
        case checked(KeyCheck)
        case failed(Failure)
    }

    let path: String
    let result: Result

    init(path: String, result: Result) {
        self.path = path
        self.result = result
    }

    init(path: String, failure: Failure) {
        self.init(path: path, result: .failed(failure))
    }

    /// Opens the database with its key list, which rotates it when needed.
    static func rotate(path: String, keysFile: KeysFile, options: OpenOptions) -> DatabaseOutcome {
        do {
            let keys = try keysFile.keyList(forDatabase: path)
            do {
                let report = try EncryptedDatabase(path: path, keys: keys, options: options).report
                return DatabaseOutcome(path: path, result: report.rotated ? .rotated(report) : .alreadyCurrent(report))
            } catch {
                return DatabaseOutcome(path: path, failure: .database(error))
            }
        } catch {
            return DatabaseOutcome(path: path, failure: .keys(error))
        }
    }

    /// Finds the key that opens the database without writing.
    static func check(path: String, keysFile: KeysFile, options: OpenOptions) -> DatabaseOutcome {
        do {
            let keys = try keysFile.keyList(forDatabase: path)
            do {
                return DatabaseOutcome(path: path, result: .checked(try EncryptedDatabase.check(path: path, keys: keys, busyTimeout: options.busyTimeout)))
            } catch {
                return DatabaseOutcome(path: path, failure: .database(error))
            }
        } catch {
            return DatabaseOutcome(path: path, failure: .keys(error))
        }
    }

    var status: ExitStatus {
        switch result {
        case .rotated, .alreadyCurrent: return .success
        case .checked(let check): return check.needsRotation ? .needsRotation : .success
        case .failed(.keys(let error)): return ExitStatus(error)
        case .failed(.database(let error)): return ExitStatus(error)
        }
    }
}
