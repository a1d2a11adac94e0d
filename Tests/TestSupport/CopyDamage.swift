import Foundation

/// The three ways the verification tests spoil a copy between its writing and its check (through
/// the file-operations seam, `FileOperations.written`): the independent `sqlcipher` shell deletes
/// a row or changes `user_version` with the copy's key, or the last page's bytes are overwritten so
/// that its HMAC no longer matches. Backups, decrypted copies and background copies share them.
///
/// ```swift
/// options.files.written = { copy in
///     if let problem = CopyDamage.pageScribbled.apply(to: copy, key: ring.keys[1].shellKey) { Issue.record(Comment(rawValue: problem)) }
/// }
/// ```
public enum CopyDamage: String, CaseIterable, Sendable {
    case rowMissing = "a row missing", userVersion = "another user_version", pageScribbled = "a page overwritten"

    /// Spoils the database copy at `path`, which `key` opens; returns why it could not, or `nil`.
    public func apply(to path: String, key: ShellKey) -> String? {
        let sql: String
        switch self {
        case .rowMissing: sql = "DELETE FROM people WHERE id = 17;"
        case .userVersion: sql = "PRAGMA user_version = 43;"
        case .pageScribbled:
            guard let handle = FileHandle(forUpdatingAtPath: path) else { return "cannot open the copy \(path)" }
            defer { try? handle.close() }
            let size = handle.seekToEndOfFile()
            handle.seek(toFileOffset: size - 512)
            handle.write(Data(repeating: 0x5a, count: 256))
            try? handle.synchronize()
            return nil
        }
        do {
            let result = try SQLCipherShell.run(path, key: key, sql)
            return result.status == 0 ? nil : "the shell could not spoil the copy: \(result.stderr)"
        } catch {
            return "the shell could not run: \(error)"
        }
    }
}
