import EncryptedSQLite
import Foundation

/// One kind of bad input of the bad-input matrix: what it is, the error it must give, and the
/// advice its message must contain.
///
/// The matrix tests (`BadInputMatrixTests` for the library and the Keys file, `BadInputCLITests`
/// for the `rekey` command) implement every case by its id and assert, for each: the error kind
/// (or exit code), that the message names the file or key id, that it contains ``advice``, that no
/// key material appears in it, and that the database file is byte-identical with no side files.
/// `docs/errors.md` is rendered from this list (``BadInputCatalog/markdown``) and checked by a test.
public struct BadInputCase: Sendable {
    /// Where the bad input is given.
    public enum Area: String, Sendable, CaseIterable {
        case library = "Library (EncryptedDatabase, migrations)"
        case keys = "Keys file and key lists"
        case cli = "The rekey command"
    }

    /// A stable identifier, e.g. `db.missing`.
    public let id: String
    /// Where the bad input is given.
    public let area: Area
    /// The bad input, in words.
    public let input: String
    /// The error's kind as ``ErrorKind/name(of:)`` renders it, e.g.
    /// `EncryptedDatabaseError.fileNotFound`; `exit 66` for the command.
    public let error: String
    /// Words that must appear in the message: what it tells the user to do.
    public let advice: String

    /// The exit code, for command-line cases.
    public var exitCode: Int32? {
        error.hasPrefix("exit ") ? Int32(error.dropFirst(5)) : nil
    }

    /// `db.missing: database file missing`.
    public var testDescription: String { "\(id): \(input)" }
}

/// Every bad input of the matrix.
public enum BadInputCatalog {
    private static func library(_ id: String, _ input: String, _ error: String, _ advice: String) -> BadInputCase {
        BadInputCase(id: id, area: .library, input: input, error: error, advice: advice)
    }

    private static func keys(_ id: String, _ input: String, _ error: String, _ advice: String) -> BadInputCase {
        BadInputCase(id: id, area: .keys, input: input, error: error, advice: advice)
    }

    private static func cli(_ id: String, _ input: String, _ exit: Int32, _ advice: String) -> BadInputCase {
        BadInputCase(id: id, area: .cli, input: input, error: "exit \(exit)", advice: advice)
    }

    /// The cases, grouped by area.
    public static let cases: [BadInputCase] = [
        // The database file, through EncryptedDatabase.
        library("db.missing", "database file missing", "EncryptedDatabaseError.fileNotFound", "check the path, or allow creation (createIfMissing)"),
        library("db.missingFolder", "new database (createIfMissing) in a folder that does not exist", "EncryptedDatabaseError.fileNotFound", "check the path"),
        library("db.directory", "a directory instead of the database", "EncryptedDatabaseError.notARegularFile", "give the path of the database file itself"),
        library("db.fifo", "a named pipe instead of the database", "EncryptedDatabaseError.notARegularFile", "give the path of the database file itself"),
        library("db.empty", "empty (0-byte) database file", "EncryptedDatabaseError.emptyFile", "delete it and create the database again"),
        library("db.truncated", "database truncated to 100 bytes", "EncryptedDatabaseError.fileTooShort", "restore the file from a backup"),
        library("db.firstPageOnly", "encrypted database truncated to its first page", "EncryptedDatabaseError.noKeyOpens", "Add the key it was written with to its key list"),
        library("db.randomBytes", "8 KiB of random bytes", "EncryptedDatabaseError.noKeyOpens", "Add the key it was written with to its key list"),
        library("db.unknownKey", "database encrypted with a key that is not in the list", "EncryptedDatabaseError.noKeyOpens", "Add the key it was written with to its key list"),
        library("db.legacyUnmarked", "SQLCipher 2 file (kdf_iter 4000) whose key lacks `legacy: true`", "EncryptedDatabaseError.noKeyOpens", "with `legacy: true` for a SQLCipher 1.x/2.x file"),
        library("db.otherSettings", "file with 2 KiB pages whose key lacks `cipher: {page_size: 2048}`", "EncryptedDatabaseError.noKeyOpens", "`cipher:` for other settings"),
        library("db.sqlcipher4", "file written by SQLCipher 4 with its defaults, on SQLCipher 3 (SQLCipher 4 reads it)", "EncryptedDatabaseError.sqlcipher4File", "Convert it on a host linked with SQLCipher 4"),
        library("db.plaintext", "unencrypted SQLite database, no plaintext entry", "EncryptedDatabaseError.plaintextDatabase", "add `plaintext: true` as the first (oldest) key entry"),
        library("db.unreadable", "database file this user cannot read (mode 0600, another owner)", "EncryptedDatabaseError.permissionDenied", "check the file's and its folder's owner and mode"),
        library("db.readOnlyFile", "database on an old key that this user cannot write", "EncryptedDatabaseError.readOnly", "rotation and creation need write access to the file and its folder"),
        library("db.readOnlyOpen", "read-only open of a database on an old key", "EncryptedDatabaseError.rotationNeeded", "open it read-write (or run rekey) to rotate it"),
        library("db.locked", "database locked by another process (sqlcipher shell in BEGIN EXCLUSIVE)", "EncryptedDatabaseError.busy", "try again when it is idle, or raise the busy timeout"),
        library("db.walOpenElsewhere", "plaintext WAL-mode database to encrypt while another process has it open", "EncryptedDatabaseError.busy", "close other connections before encrypting"),
        library("db.diskFull", "rotation on a disk without room for the journal (128 KiB tmpfs)", "EncryptedDatabaseError.diskFull", "free space (a rotation needs room for a journal as large as the database)"),
        library("db.noInode", "rotation on a disk with space but no free inode for the journal (tmpfs nr_inodes)", "EncryptedDatabaseError.diskFull", "free space (a rotation needs room for a journal as large as the database)"),
        library("db.noInodeEngineRekey", "the same with the engine's rekey (--strategy engineRekey), which returns OK and writes nothing", "EncryptedDatabaseError.rotationNotApplied", "Check free disk space, permissions and locks, then try again"),
        library("db.createDiskFull", "new database (createIfMissing) on a full disk", "EncryptedDatabaseError.diskFull", "free space"),
        library("mig.edited", "SQL migration edited after it was applied", "EncryptedDatabaseError.migrationFailed(.checksumMismatch)", "restore its original text and put the change in a new migration"),
        library("mig.newer", "database migrated by a newer app version (unknown applied migration)", "EncryptedDatabaseError.migrationFailed(.unknownAppliedMigrations)", "run that version, or restore a backup"),
        library("mig.failing", "migration whose SQL fails", "EncryptedDatabaseError.migrationFailed(.migrationFailed)", "fix the migration and run it again"),
        library("mig.fileName", "migration file without a version prefix (create_users.sql)", "MigrationError.invalidFileName", "must be named <version>_<name>.sql"),
        library("mig.notUTF8", "migration file that is not UTF-8", "MigrationError.fileUnreadable", "save it as UTF-8"),
        library("mig.emptyUp", "migration file with only a -- down section", "MigrationError.emptyMigration", "put the migration's SQL above that line"),

        // The Keys file, its key sources, and key lists.
        keys("keys.missing", "Keys file missing", "KeyConfigurationError.keysFileMissing", "copy Keys.example to it"),
        keys("keys.directory", "Keys file is a directory", "KeyConfigurationError.keysFileUnreadable", "check that it is a file this user can read"),
        keys("keys.unreadable", "Keys file this user cannot read", "KeyConfigurationError.keysFileUnreadable", "check that it is a file this user can read"),
        keys("keys.empty", "empty Keys file", "KeyConfigurationError.keysFileInvalid", "see Keys.example for the expected shape"),
        keys("keys.notYAML", "Keys file that is not YAML (unclosed bracket)", "KeyConfigurationError.keysFileInvalid", "see Keys.example for the expected shape"),
        keys("keys.notUTF8", "Keys file that is not UTF-8 text", "KeyConfigurationError.keysFileInvalid", "see Keys.example for the expected shape"),
        keys("keys.wrongShape", "Keys file of the wrong shape (a list at the top)", "KeyConfigurationError.keysFileInvalid", "see Keys.example for the expected shape"),
        keys("keys.duplicateField", "a field given twice in one key entry", "KeyConfigurationError.keysFileInvalid", "keep one"),
        keys("keys.emptyList", "empty key list (`keys: []`)", "KeyConfigurationError.emptyKeyList", "list at least one key"),
        keys("keys.emptyID", "key with an empty id", "KeyConfigurationError.emptyKeyID", "give every key a label"),
        keys("keys.duplicateID", "two keys with the same id", "KeyConfigurationError.duplicateKeyID", "give every key its own id"),
        keys("keys.twoSources", "two sources on one key (passphrase and env)", "KeyConfigurationError.keySourceCount", "give exactly one of passphrase, hex, env, file"),
        keys("keys.noSource", "key with no source", "KeyConfigurationError.keySourceCount", "give exactly one of passphrase, hex, env, file"),
        keys("keys.unknownField", "unknown field (typo `passprase`)", "KeyConfigurationError.unknownField", "check its spelling"),
        keys("keys.secretAsField", "`{passphrase:secret}` without a space (YAML reads one field name)", "KeyConfigurationError.unknownField", "so it is not shown"),
        keys("keys.hexLength", "hex key of the wrong length (63 digits)", "KeyConfigurationError.invalidMaterial(.wrongHexLength)", "write all 64 digits"),
        keys("keys.hexDigits", "hex key with a non-hex digit", "KeyConfigurationError.invalidMaterial(.notHex)", "write the key in hex"),
        keys("keys.emptyPassphrase", "empty passphrase", "KeyConfigurationError.invalidMaterial(.empty)", "give a passphrase or 64 hex digits"),
        keys("keys.nulPassphrase", "passphrase with a NUL character", "KeyConfigurationError.invalidMaterial(.containsNUL)", "for a binary key file use format binary"),
        keys("keys.envUnset", "environment variable not set", "KeyConfigurationError.environmentVariableUnset", "export it before running"),
        keys("keys.envEmpty", "environment variable set but empty", "KeyConfigurationError.invalidMaterial(.empty)", "give a passphrase or 64 hex digits"),
        keys("keys.envHoldsKey", "`env:` given the key itself instead of a variable name", "KeyConfigurationError.keysFileInvalid", "put the key in that variable"),
        keys("keys.keyFileMissing", "key file missing", "KeyConfigurationError.keyFileUnreadable", "check the path, and that it is a regular file this user can read"),
        keys("keys.keyFileGroup", "key file readable by its group (0640)", "KeyConfigurationError.keyFileTooPermissive", "run: chmod 600"),
        keys("keys.keyFileWorld", "key file readable by everyone (0644)", "KeyConfigurationError.keyFileTooPermissive", "run: chmod 600"),
        keys("keys.keyFileDirectory", "key file is a directory", "KeyConfigurationError.keyFileUnreadable", "check the path, and that it is a regular file this user can read"),
        keys("keys.keyFileHuge", "key file larger than 64 KiB", "KeyConfigurationError.keyFileUnreadable", "a key file holds one key"),
        keys("keys.keysFIFO", "Keys file that is a named pipe (opened without blocking)", "KeyConfigurationError.keysFileUnreadable", "check that it is a file this user can read"),
        keys("keys.keysDevice", "Keys file that is a device (a link to `/dev/zero`)", "KeyConfigurationError.keysFileUnreadable", "check that it is a file this user can read"),
        keys("keys.keysHuge", "Keys file larger than 64 MiB", "KeyConfigurationError.keysFileUnreadable", "more than the 67108864 a Keys file may have"),
        keys("keys.keysReadable", "Keys file holding passphrase:/hex: material, readable by others (0644)", "KeyConfigurationError.keysFileUntrusted(.readableByOthers)", "run: chmod 600"),
        keys("keys.keysWritable", "Keys file writable by others (0666)", "KeyConfigurationError.keysFileUntrusted(.writableByOthers)", "run: chmod go-w"),
        keys("keys.keysOwner", "Keys file owned by another user (0644, no material in it)", "KeyConfigurationError.keysFileUntrusted(.ownedByOtherUser)", "run: chown"),
        keys("keys.keyFileFIFO", "key file that is a named pipe (hung forever before)", "KeyConfigurationError.keyFileUnreadable", "check the path, and that it is a regular file this user can read"),
        keys("keys.keyFileOwner", "key file (0600) owned by another user", "KeyConfigurationError.keyFileUntrusted(.ownedByOtherUser)", "run: chown"),
        keys("keys.keyFileFolder", "key file in a folder everyone can write (0777, not sticky)", "KeyConfigurationError.keyFileUntrusted(.folderWritableByOthers)", "run: chmod go-w"),
        keys("keys.tag", "YAML tag on a key (`passphrase: !!binary …`; was ignored before)", "KeyConfigurationError.keysFileInvalid", "remove the tag"),
        keys("keys.blockScalar", "passphrase written as a block scalar (`passphrase: |`)", "KeyConfigurationError.keysFileInvalid", "on one line, plain or in quotes"),
        keys("keys.passphraseTooLong", "passphrase longer than 1024 bytes", "KeyConfigurationError.invalidMaterial(.tooLong)", "at most 1024 bytes"),
        keys("keys.wordAsField", "a word-shaped passphrase written as a field name", "KeyConfigurationError.unknownField", "so it is not shown"),
        keys("keys.envNotUpperCase", "a word-shaped passphrase written under `env:` (no such variable)", "KeyConfigurationError.environmentVariableUnset", "its name is not shown"),
        keys("keys.binarySize", "binary key file that is not 32 bytes", "KeyConfigurationError.invalidMaterial(.wrongByteCount)", "write exactly 32 bytes"),
        keys("keys.formatOnPassphrase", "`format:` on a passphrase key", "KeyConfigurationError.keysFileInvalid", "see Keys.example for the expected shape"),
        keys("keys.unknownFormat", "unknown format (`format: pem`)", "KeyConfigurationError.keysFileInvalid", "format must be one of: passphrase, hex, binary"),
        keys("keys.binaryEnv", "`format: binary` on an env key", "KeyConfigurationError.keysFileInvalid", "format binary applies to key files only"),
        keys("keys.sameMaterial", "two keys with the same material", "KeyConfigurationError.duplicateKeyMaterial", "give the new key new material"),
        keys("keys.plaintextNotFirst", "plaintext entry that is not the first", "KeyConfigurationError.plaintextEntryMisplaced", "move it to the top"),
        keys("keys.plaintextAlone", "plaintext entry as the only key", "KeyConfigurationError.plaintextEntryMisplaced", "move it to the top"),
        keys("keys.pageSize", "page_size that is not a power of two (1000)", "KeyConfigurationError.invalidCipherSettings", "fix its cipher: settings"),
        keys("keys.cipherGeneration", "`cipher:` naming no generation (`sqlcipher5`)", "KeyConfigurationError.keysFileInvalid", "cipher must be one of sqlcipher1, sqlcipher2, sqlcipher3, sqlcipher4"),
        // Key-encryption keys and wrapped data keys (issue 22).
        keys("keys.kekWrong", "wrapped data key made by another KEK under the same KEK id", "KeyConfigurationError.unwrapping(.doesNotAuthenticate)", "Restore this entry's wrapped_by and wrapped_key"),
        keys("keys.wrappedTampered", "wrapped data key with one byte changed", "KeyConfigurationError.unwrapping(.doesNotAuthenticate)", "Restore this entry's wrapped_by and wrapped_key"),
        keys("keys.wrappedMoved", "wrapped value copied from another key entry (another key id)", "KeyConfigurationError.unwrapping(.doesNotAuthenticate)", "copied from another key entry"),
        keys("keys.wrappedRelabelled", "wrapped value relabelled with another listed KEK's id", "KeyConfigurationError.unwrapping(.doesNotAuthenticate)", "made by another key-encryption key"),
        keys("keys.kekNotListed", "wrapped_by names a KEK that key_encryption_keys does not list", "KeyConfigurationError.keyEncryptionKeyNotListed", "add that KEK back"),
        keys("keys.kekNoSalt", "passphrase KEK without salt:", "KeyConfigurationError.keysFileInvalid", "needs salt:"),
        keys("keys.kekEnvUnset", "KEK read from an environment variable that is not set", "KeyConfigurationError.environmentVariableUnset", "export it before running"),
        keys("keys.pinInKeysFile", "PKCS#11 KEK with its PIN written in the Keys file (`pin:`)", "KeyConfigurationError.keysFileInvalid", "a PIN is never written in the Keys file"),
        keys("keys.pinBesidePinEnv", "PKCS#11 KEK with `pin:` written beside `pin_env:`", "KeyConfigurationError.keysFileInvalid", "a PIN is never written in the Keys file"),
        keys("keys.pinBesidePinFile", "PKCS#11 KEK with `pin:` written beside `pin_file:`", "KeyConfigurationError.keysFileInvalid", "a PIN is never written in the Keys file"),
        keys("keys.wrappedHalf", "wrapped_by without wrapped_key", "KeyConfigurationError.keysFileInvalid", "needs both wrapped_by"),
        keys("keys.wrappedNotBase64", "wrapped_key that is not base64", "KeyConfigurationError.keysFileInvalid", "not base64"),
        keys("keys.credentialOutsideService", "credential: source with CREDENTIALS_DIRECTORY unset (not a systemd service)", "KeyConfigurationError.credentialsDirectoryUnset", "run it as a systemd service"),
        keys("keys.pkcs11WrongPIN", "PKCS#11 KEK whose PIN variable holds a wrong PIN (SoftHSM2)", "KeyConfigurationError.keyEncryptionKeyUnavailable(.pkcs11)", "refused the user PIN"),
        keys("keys.pkcs11NoModule", "PKCS#11 KEK naming a module that does not exist", "KeyConfigurationError.keyEncryptionKeyUnavailable(.pkcs11)", "install the token's library"),
        keys("keys.pkcs11NoToken", "PKCS#11 KEK naming a token the module does not have (SoftHSM2)", "KeyConfigurationError.keyEncryptionKeyUnavailable(.pkcs11)", "correct pkcs11: token: or slot:"),
        keys("keys.pkcs11NoKey", "PKCS#11 KEK naming a key label the token does not have (SoftHSM2)", "KeyConfigurationError.keyEncryptionKeyUnavailable(.pkcs11)", "make the key on the token"),
        keys("keys.hmacAlgorithm", "unknown `hmac_algorithm` (`md5`)", "KeyConfigurationError.keysFileInvalid", "hmac_algorithm must be one of: sha1, sha256, sha512"),
        keys("keys.kdfIterHuge", "kdf_iter beyond 32 bits (3000000000; crashed the open before)", "KeyConfigurationError.invalidCipherSettings", "fix its cipher: settings"),
        keys("keys.outOfOrder", "keys listed newest first (their `created:` dates out of order)", "KeyConfigurationError.keysOutOfOrder", "list keys oldest first"),
        keys("keys.createdNotDate", "`created:` that is not a date (2025-13-01)", "KeyConfigurationError.keysFileInvalid", "created must be a date written YYYY-MM-DD"),
        keys("keys.emptyPath", "database entry with an empty path", "KeyConfigurationError.keysFileInvalid", "see Keys.example for the expected shape"),
        keys("keys.notListed", "database not listed in the Keys file", "KeyConfigurationError.databaseNotConfigured", "add an entry with its keys"),

        // The rekey command.
        cli("cli.keyOption", "`--key <secret>` on the command line", 64, "not accepted on the command line"),
        cli("cli.passphraseOption", "`--passphrase=<secret>` on the command line", 64, "not accepted on the command line"),
        cli("cli.hexOption", "`--hex <secret>` on the command line", 64, "not accepted on the command line"),
        cli("cli.unknownArgument", "an unknown argument (maybe a secret)", 64, "not shown in case they hold a secret"),
        cli("cli.noDatabase", "no `--db` and no `--all`", 64, "give at least one database with --db"),
        cli("cli.jobs", "`--jobs 0`", 64, "--jobs must be between 1 and 256"),
        cli("cli.threads", "`--threads 0`", 64, "--threads must be between 1 and 256"),
        cli("cli.busyTimeout", "`--busy-timeout 100000`", 64, "--busy-timeout must be between 0 and 86400 seconds"),
        cli("cli.secretAsJobs", "a secret given as the value of `--jobs` (echoed by the parser before)", 64, "is invalid for '--jobs <n>'"),
        cli("cli.secretAsVerify", "a secret given as `--verify=<secret>`", 64, "is invalid for '--verify <verify>'"),
        cli("cli.decryptUnconfirmed", "`decrypt` without `--confirm-plaintext`", 64, "add --confirm-plaintext"),
        cli("cli.decryptExists", "`decrypt --out` an existing file", 73, "Choose a new path or remove the file yourself"),
        cli("cli.dumpExists", "`dump --out` an existing file", 73, "Choose a new path or remove the file yourself"),
        cli("cli.allNothing", "`--all` with a Keys file whose patterns match no file", 64, "check its paths and glob patterns"),
        cli("cli.keysMissing", "Keys file missing", 78, "copy Keys.example to it"),
        cli("cli.keysNotYAML", "Keys file that is not YAML", 78, "see Keys.example for the expected shape"),
        cli("cli.pinBesidePinEnv", "`rekey keys retire-check` with a PKCS#11 KEK whose `pin:` is written beside `pin_env:`", 78, "a PIN is never written in the Keys file"),
        cli("cli.pinBesidePinFile", "`rekey keys retire-check` with a PKCS#11 KEK whose `pin:` is written beside `pin_file:`", 78, "a PIN is never written in the Keys file"),
        cli("cli.notListed", "database not listed in the Keys file", 78, "add an entry with its keys"),
        cli("cli.envUnset", "environment variable not set", 78, "export it before running"),
        cli("cli.kdfIterHuge", "kdf_iter beyond 32 bits (crashed with SIGILL, exit 132, before)", 78, "fix its cipher: settings"),
        cli("cli.keyFileReadable", "key file readable by others", 77, "run: chmod 600"),
        cli("cli.missingDatabase", "database file missing", 66, "check the path"),
        cli("cli.statusMissing", "`status` of a missing database", 66, "check the path"),
        cli("cli.noKeyOpens", "no configured key opens the file", 65, "Add the key it was written with to its key list"),
        cli("cli.dumpNoKey", "`dump` of a file no configured key opens", 65, "Add the key it was written with to its key list"),
        cli("cli.plaintext", "unencrypted database, no plaintext entry", 65, "add `plaintext: true` as the first (oldest) key entry"),
        cli("cli.empty", "empty database file", 65, "delete it and create the database again"),
        cli("cli.directory", "a directory instead of the database", 65, "give the path of the database file itself"),
        cli("cli.unreadable", "database this user cannot read (run as nobody)", 77, "check the file's and its folder's owner and mode"),
        cli("cli.readOnlyFile", "database this user cannot write (run as nobody)", 77, "rotation and creation need write access to the file and its folder"),
        cli("cli.readOnlyFolder", "database in a folder this user cannot write (run as nobody)", 77, "rotation and creation need write access to the file and its folder"),
        cli("cli.locked", "database locked by another process", 75, "try again when it is idle"),
        cli("cli.fileSizeLimit", "file-size limit too small for the journal (`ulimit -f`)", 74, "free space"),
        cli("cli.diskFull", "disk without room for the journal (128 KiB tmpfs)", 74, "free space"),
    ]

    /// The cases of one area.
    public static func cases(in area: BadInputCase.Area) -> [BadInputCase] {
        cases.filter { $0.area == area }
    }

    /// The case with this id.
    public static func `case`(_ id: String) -> BadInputCase {
        guard let found = cases.first(where: { $0.id == id }) else { fatalError("no bad-input case \(id)") }
        return found
    }

    /// `docs/errors.md`: the tables of every case, by area.
    public static var markdown: String {
        var lines = [
            "# Errors for bad input",
            "",
            "<!-- Generated from Tests/TestSupport/BadInputCatalog.swift; do not edit by hand.",
            "     Regenerate with: UPDATE_ERROR_TABLE=1 swift test --filter ErrorTable -->",
            "",
            "Every row is a test of the bad-input matrix (`Tests/EncryptedSQLiteTests/BadInputMatrixTests.swift`,",
            "`Tests/EndToEndTests/BadInputCLITests.swift`). Each asserts the error kind (or the exit code), that the",
            "message names the file or key id and contains the advice shown here, that no key material appears in",
            "it (marker passphrases, hex keys and environment values are searched for), and that the database file",
            "is byte-identical with no side files left beside it.",
            "",
            "\(cases.count) bad inputs: " + BadInputCase.Area.allCases.map { "\(cases(in: $0).count) \(Self.shortName($0))" }.joined(separator: ", ") + ".",
        ]
        var number = 0
        for area in BadInputCase.Area.allCases {
            lines += ["", "## \(area.rawValue)", ""]
            lines.append(area == .cli ? "| # | bad input | exit | the message says |" : "| # | bad input | error | the message says |")
            lines.append("|---|---|---|---|")
            for item in cases(in: area) {
                number += 1
                let error = area == .cli ? item.error.replacingOccurrences(of: "exit ", with: "") : "`\(item.error)`"
                lines.append("| \(number) | \(escape(item.input)) | \(error) | \(escape(item.advice)) |")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private static func shortName(_ area: BadInputCase.Area) -> String {
        switch area {
        case .library: return "library"
        case .keys: return "Keys file"
        case .cli: return "command line"
        }
    }

    private static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "|", with: "\\|").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}

/// Names an error's kind the way the catalog writes it: `Type.case`, with the nested kind of a
/// wrapped error or problem, e.g. `KeyConfigurationError.invalidMaterial(.notHex)`.
public enum ErrorKind {
    /// The kind of `error`.
    public static func name(of error: any Error) -> String {
        let type = String(describing: Swift.type(of: error))
        return "\(type).\(caseName(of: error))" + nested(in: error).map { "(.\($0))" }.joined()
    }

    /// The enum case name of `value` (its payload dropped).
    static func caseName(of value: Any) -> String {
        let mirror = Mirror(reflecting: value)
        if mirror.displayStyle == .enum, let label = mirror.children.first?.label { return label }
        // The public error cases without a payload (reflection shows their description instead).
        if let problem = value as? KeyMaterialProblem, problem == .empty { return "empty" }
        if let error = value as? MigrationError, error == .emptyIdentifier { return "emptyIdentifier" }
        if let problem = value as? KeyWrappingProblem {
            switch problem {
            case .doesNotAuthenticate: return "doesNotAuthenticate"
            case .notBase64: return "notBase64"
            case .saltNeeded: return "saltNeeded"
            default: break
            }
        }
        return "\(value)"
    }

    private static func nested(in error: any Error) -> [String] {
        let mirror = Mirror(reflecting: error)
        guard mirror.displayStyle == .enum, let payload = mirror.children.first?.value else { return [] }
        let values = Mirror(reflecting: payload).displayStyle == .tuple ? Mirror(reflecting: payload).children.map(\.value) : [payload]
        return values.compactMap { value in
            if value is any Error, Mirror(reflecting: value).displayStyle == .enum { return caseName(of: value) }
            return nil
        }
    }
}

/// The folder, keys and secrets of one bad-input case: `app.sqlite` in a fresh folder and a ring of
/// `k1` (passphrase), `k2` (hex) and `k3` (passphrase from an environment variable, current).
/// Every secret a case makes is collected, so that the checks can search messages for all of them.
public final class BadInputContext: @unchecked Sendable {
    /// The case's folder.
    public let directory: TemporaryDirectory
    /// The keys of `app.sqlite`.
    public let ring: TestKeyring
    /// Every secret this case made; none may appear in a message.
    public private(set) var secrets: [String]
    /// File systems mounted for the case; unmounted when the context goes away, after the checks.
    public var disks: [SmallFilesystem] = []

    /// A new folder named after `label`.
    public init(_ label: String) {
        directory = TemporaryDirectory(label)
        ring = TestKeyring([.passphrase, .hex, .envPassphrase], in: directory)
        secrets = ring.keys.map(\.secret)
    }

    /// `app.sqlite` in the folder.
    public var db: String { directory.file("app.sqlite") }

    /// A new marker passphrase (registered as a secret).
    public func passphrase(_ label: String) -> String { secret(TestKeys.passphrase(label)) }

    /// New marker hex digits (registered as a secret).
    public func hex() -> String { secret(TestKeys.hex()) }

    /// Registers text that must not appear in any message (e.g. a malformed key).
    @discardableResult
    public func secret(_ text: String) -> String {
        TestSecrets.register(text)
        secrets.append(text)
        return text
    }

    /// Collects a secret without registering it, so that the helpers let it into a command line
    /// (for the cases that pass a key on the command line on purpose).
    public func argumentSecret() -> String {
        let secret = "ARGV-SECRET-\(UUID().uuidString)"
        secrets.append(secret)
        return secret
    }

    /// The fixture, made by the sqlcipher shell with key `index` of the ring (`settings` is SQL run
    /// right after the key, e.g. `PRAGMA kdf_iter = 4000;`).
    public func makeDatabase(at path: String? = nil, key index: Int, settings: String = "", rows: Int = 20) throws {
        let result = try SQLCipherShell.run(path ?? db, key: ring.keys[index].shellKey, settings + Fixture.sql(rows: rows))
        guard result.status == 0 else { throw FixtureError(message: result.stderr) }
    }

    /// Writes `text` to `name` in the folder.
    public func write(_ text: String, to name: String = "Keys") {
        _ = FileManager.default.createFile(atPath: directory.file(name), contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
    }

    /// Copies a fixture made with key `index` onto a tmpfs with room for the file and 32 KiB more
    /// (not for a rotation's journal). The mount lives as long as the context.
    /// - Returns: the file's path on the tmpfs, or the reason no tmpfs could be mounted.
    public func databaseOnNearlyFullDisk(key index: Int) throws -> Result<String, FixtureError> {
        let source = directory.file("source.sqlite")
        try makeDatabase(at: source, key: index, rows: 300)
        let bytes = Int(TestFiles.contents(source)?.count ?? 0)
        switch SmallFilesystem.mount(size: (bytes + 32 * 1024 + 4095) / 4096 * 4096) {
        case .failure(let reason): return .failure(reason)
        case .success(let disk):
            disks.append(disk)
            let path = disk.file("app.sqlite")
            try TestFiles.copy(source, to: path)
            return .success(path)
        }
    }
}
