import CipherFormats
import DurableFiles
import Foundation

/// A new key made by ``create(keysFile:databases:id:keyFile:format:created:)``: 256 random bits in
/// a new key file, appended to the Keys file as the current key of one or more database entries
/// (a database pattern and its backups' pattern share their keys). Holds the
/// names only, never the key.
///
/// ```swift
/// // A new current key for every tenant database, dated today.
/// let key = try GeneratedKey.create(keysFile: "Keys", databases: ["tenants/*.sqlite", "backups/*.sqlite"], id: "2026-11")
/// print(key.keyFile)   // /srv/app/2026-11.key (mode 0600)
/// // Then rotate: `rekey --all`, or open each database with its new key list.
/// ```
public struct GeneratedKey: Sendable, Equatable, Codable {
    /// The Keys file that was edited.
    public let keysFile: String
    /// The database entries' paths or patterns the key was added to, as the Keys file writes them.
    public let databases: [String]
    /// The new key's id.
    public let keyID: String
    /// The new key file's absolute path; `nil` for a wrapped data key (its value is in the Keys file).
    public let keyFile: String?
    /// How the key file is written: `binary` (32 bytes) or `hex` (64 hex digits and a newline);
    /// `nil` for a wrapped data key.
    public let format: KeyFormat?
    /// The `created:` date written (`YYYY-MM-DD`), or `nil`.
    public let created: String?

    /// Makes a new key for the entries `databases` of the Keys file at `keysFile`:
    ///
    /// 1. checks that each entry exists and has no key `id`;
    /// 2. draws 32 bytes from the system's random generator (`SystemRandomNumberGenerator`, which
    ///    is `getrandom(2)` on Linux) into a zeroed buffer;
    /// 3. writes them to `keyFile`, a NEW file (created exclusively under a temporary name with
    ///    mode 0600, flushed, linked into place without ever replacing a file, folder flushed);
    /// 4. appends `- id: …, file: …, format: …, created: …` as the last (current) key of each
    ///    entry, editing the Keys file's text in place so that its comments and layout stay, and
    ///    checks that the edited text loads as the same entries plus the new key;
    /// 5. replaces the Keys file durably (temporary, flush, rename, folder flush), keeping its mode.
    ///
    /// When step 4 or 5 fails the new key file is removed again and the Keys file is unchanged.
    /// The key is never printed, logged or passed to another process.
    /// - Parameters:
    ///   - keysFile: The Keys file's path.
    ///   - databases: The entries' `path`s exactly as the Keys file writes them (files or
    ///     patterns); the same key is appended to each.
    ///   - id: The new key's id (by default today's date, `YYYY-MM-DD`).
    ///   - keyFile: Where the key goes (relative paths from the working directory); by default
    ///     `<id>.key` beside the Keys file. Written into the Keys file relative to its folder when
    ///     inside it, else absolute.
    ///   - format: `binary` (default) or `hex`.
    ///   - created: The day to record as `created:`, or `nil` for none (default: today, UTC).
    /// - Throws: ``KeyMakingError``.
    ///   - wrapped: `true` for a wrapped data key: the key is wrapped by the Keys file's current
    ///     key-encryption key and written into the Keys file as `wrapped_by:`/`wrapped_key:`; no
    ///     key file is made (`keyFile` and `format` are ignored).
    public static func create(
        keysFile: String, databases: [String], id: String? = nil, keyFile: String? = nil,
        format: KeyFormat = .binary, wrapped: Bool = false, created: Date? = Date()
    ) throws(KeyMakingError) -> GeneratedKey {
        let today = KeyCreationDate.text(of: Calendar.utc.startOfDay(for: Date()))
        let id = id ?? today
        guard wrapped || format != .passphrase else { throw .unsupportedFormat }
        let keysFolder = FileSystem.folder(of: KeysFile.absolute(keysFile, base: FileManager.default.currentDirectoryPath))
        let createdText = created.map { KeyCreationDate.text(of: Calendar.utc.startOfDay(for: $0)) }
        // A wrapped data key needs no key file: its value goes into the Keys file.
        var keyPath: String?
        let lines: KeysFileKeyLines
        if wrapped {
            let loaded: KeysFile
            do throws(KeyConfigurationError) { loaded = try KeysFile.load(path: keysFile) } catch { throw .keysFile(error) }
            let key = DataKey.random()
            let value: WrappedDataKey
            do throws(KeyConfigurationError) { value = try loaded.keyEncryptionKeys.wrap(key, dataKeyID: id) } catch { throw .keysFile(error) }
            lines = KeysFileKeyLines(id: id, material: .wrapped(value), created: createdText)
        } else {
            let path = try keyFilePath(keyFile, id: id, keysFolder: keysFolder)
            let written = path.hasPrefix(keysFolder + "/") ? String(path.dropFirst(keysFolder.count + 1)) : path
            keyPath = path
            lines = KeysFileKeyLines(id: id, file: written, format: format, created: createdText)
        }

        // The Keys file is first read as every load reads it (TrustedFile: no FIFO or device, the
        // size cap, the owner and mode rules), so that an edit never starts from a file a load refuses.
        do throws(KeyConfigurationError) { _ = try KeysFile.load(path: keysFile) } catch { throw .keysFile(error) }
        let original = try readText(keysFile)
        // Temporaries of an earlier edit that was killed (each held a Keys file or a new key).
        FileOperations.system.removeAbandonedWholeFileTemporaries(in: keysFolder)
        guard !databases.isEmpty else { throw .notEdited(keysFile: keysFile, problem: "no database entry named") }
        var edited = original
        do {
            for database in databases {
                edited = try KeysFileEditing.appending(lines, toDatabase: database, in: edited, path: keysFile, baseDirectory: keysFolder)
            }
        } catch let error as KeyConfigurationError {
            throw .keysFile(error)
        } catch let problem as KeysFileEditing.Problem {
            throw .notEdited(keysFile: keysFile, problem: problem.description)
        } catch {
            throw .notEdited(keysFile: keysFile, problem: "\(error)")
        }

        if let keyPath, FileSystem.folder(of: keyPath) != keysFolder {
            FileOperations.system.removeAbandonedWholeFileTemporaries(in: FileSystem.folder(of: keyPath))
        }
        if let keyPath { try writeKeyFile(keyPath, format: format) }
        do throws(KeyMakingError) {
            guard try readText(keysFile) == original else { throw KeyMakingError.keysFileChanged(keysFile: keysFile) }
            try replaceKeysFile(keysFile, with: edited)
        } catch {
            if let keyPath {
                FileSystem.removeIfPresent(keyPath)
                try? FileSystem.fsyncDirectory(FileSystem.folder(of: keyPath))
            }
            throw error
        }
        return GeneratedKey(keysFile: keysFile, databases: databases, keyID: id, keyFile: keyPath, format: wrapped ? nil : format, created: createdText)
    }

    static func readText(_ keysFile: String) throws(KeyMakingError) -> String {
        guard let data = FileManager.default.contents(atPath: keysFile) else {
            throw .keysFile(FileManager.default.fileExists(atPath: keysFile) ? .keysFileUnreadable(path: keysFile, reason: "it cannot be read") : .keysFileMissing(path: keysFile))
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw .keysFile(.keysFileInvalid(path: keysFile, location: "the file", problem: "it is not UTF-8 text"))
        }
        return text
    }

    /// Draws the key and writes it to the new file `path`; the bytes live only in zeroed buffers.
    private static func writeKeyFile(_ path: String, format: KeyFormat) throws(KeyMakingError) {
        let key = randomKey()
        let content: SecretBytes
        if format == .hex {
            content = key.withUnsafeBytes { raw in
                SecretBytes(count: 2 * raw.count + 1) { text in
                    for (index, byte) in raw.enumerated() {
                        text[2 * index] = Self.hexDigits[Int(byte >> 4)]
                        text[2 * index + 1] = Self.hexDigits[Int(byte & 0x0F)]
                    }
                    text[2 * raw.count] = UInt8(ascii: "\n")
                }
            }
        } else {
            content = key
        }
        try writeNewKeyFile(path, content: content)
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// 32 bytes from the system's CSPRNG (`SystemRandomNumberGenerator`: `getrandom(2)` on Linux),
    /// written straight into the zeroed buffer.
    private static func randomKey() -> SecretBytes {
        var generator = SystemRandomNumberGenerator()
        return SecretBytes(count: 32) { buffer in
            for offset in stride(from: 0, to: buffer.count, by: 8) {
                buffer.storeBytes(of: generator.next(), toByteOffset: offset, as: UInt64.self)
            }
        }
    }
}

extension Calendar {
    /// The Gregorian calendar in UTC, in which `created:` days are counted.
    static var utc: Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }
}

/// Why ``GeneratedKey/create(keysFile:databases:id:keyFile:format:created:)`` made no key. Names
/// files and ids only, never key material. After any of these, the Keys file is unchanged and no
/// new key file is left behind.
///
/// ```swift
/// do {
///     _ = try GeneratedKey.create(keysFile: "Keys", databases: ["app.sqlite"], id: "2026-11", keyFile: "keys/2026-11.key")
/// } catch let error as KeyMakingError {
///     print(error.description)  // e.g. the id is taken; the Keys file is unchanged
/// }
/// ```
public enum KeyMakingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The Keys file could not be read, or does not load (see the inner error).
    case keysFile(KeyConfigurationError)
    /// The Keys file's text could not be edited (no such entry, id taken, a layout this command
    /// does not edit, or a result that would not read back the same).
    case notEdited(keysFile: String, problem: String)
    /// The key file's path exists already; key files are never overwritten.
    case keyFileExists(path: String)
    /// The key file could not be written.
    case keyFileNotWritten(path: String, reason: String)
    /// The default key file name would come from an id that is not a safe file name.
    case keyFileNameNeeded(keyID: String)
    /// Only `binary` and `hex` key files are made.
    case unsupportedFormat
    /// The Keys file changed while the key was being made (another edit); nothing was changed.
    case keysFileChanged(keysFile: String)
    /// The edited Keys file could not be written; it is as it was.
    case keysFileNotWritten(keysFile: String, reason: String)

    /// What happened and what to do.
    public var description: String {
        switch self {
        case .keysFile(let error):
            return error.description
        case let .notEdited(keysFile, problem):
            return "Keys file \(keysFile): \(problem)"
        case .keyFileExists(let path):
            return "key file \(path) exists; key files are never overwritten: choose another --key-file or id"
        case let .keyFileNotWritten(path, reason):
            return "key file \(path) could not be written (\(reason)); check the folder exists and is writable"
        case .keyFileNameNeeded(let keyID):
            return "key id \"\(keyID)\" is not a plain file name (letters, digits, . _ -); give the key file's path"
        case .unsupportedFormat:
            return "a generated key is written as binary or hex, not as a passphrase"
        case .keysFileChanged(let keysFile):
            return "Keys file \(keysFile) changed while the key was being made; nothing was changed: run the command again"
        case let .keysFileNotWritten(keysFile, reason):
            return "Keys file \(keysFile) could not be rewritten (\(reason)); it is unchanged and the new key file was removed"
        }
    }
}

extension KeyMakingError: LocalizedError {
    /// The same text as ``description``.
    public var errorDescription: String? { description }
}
