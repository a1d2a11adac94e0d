import DurableFiles
import Foundation

/// The temporary files rotations create beside a database, and their cleanup.
///
/// - `.<name>.<8 hex>.rekey-export`: the new file of the export path, until it is swapped in.
/// - `.<name>.<8 hex>.rekey-undo`: a page re-encryption's journal between its commit and the
///   engine's check of the rotated file (the original pages, encrypted with the old key).
/// - `.<name>.<8 hex>.rekey-create`: a new database being made, until it is linked into place.
/// - `.<name>.<8 hex>.rekey-journal`: a page re-encryption's journal while it is written, until it
///   is linked to `<name>-journal` (the database is untouched until then).
/// - `.<name>.<8 hex>.rekey-backup`: an encrypted backup being written, until it is linked to its
///   name (removed by the next backup to that name when its writer died).
/// - `.<name>.<8 hex>.rekey-online`: a background rotation's copy, until it is renamed over the
///   database.
///
/// Each is created by a process that holds an exclusive `flock` on it while it lives. A process
/// killed at the wrong instant leaves one behind; the next open removes it — only when no live
/// process holds its lock, and only names of exactly this form.
enum RotationTemporaries {
    static let exportSuffix = ".rekey-export"
    static let undoSuffix = ".rekey-undo"
    static let createSuffix = ".rekey-create"
    static let journalSuffix = ".rekey-journal"
    static let backupSuffix = ".rekey-backup"
    static let onlineSuffix = ".rekey-online"
    static let suffixes = [exportSuffix, undoSuffix, createSuffix, journalSuffix, backupSuffix, onlineSuffix]

    /// A new name in the folder of `path`: `.<name>.<8 random hex digits><suffix>`.
    static func newPath(for path: String, suffix: String) -> String {
        let name = URL(fileURLWithPath: path).lastPathComponent
        let random = (0..<4).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        return FileSystem.folder(of: path) + "/.\(name).\(random)\(suffix)"
    }

    /// Creates a new temporary of `path` (``newPath(for:suffix:)``), locked while it lives, with
    /// `mode` and, when `ownerOf` is given, that file's owner.
    /// - Throws: ``EncryptedDatabaseError`` naming `reported` (the database, or a backup's
    ///   target) and `operation`: `diskFull`, `readOnly` or `ioFailure` (``EncryptedDatabaseError/from(_:path:operation:)``).
    static func create(for path: String, suffix: String, mode: mode_t = FileSystem.newFileMode, ownerOf owner: String? = nil,
                       files: FileOperations, reported: String, operation: String) throws(EncryptedDatabaseError) -> DurableNewFile {
        let temporary = newPath(for: path, suffix: suffix)
        do {
            return try DurableNewFile(temporaryPath: temporary, mode: mode, ownerOf: owner, files: files)
        } catch {
            throw .from(error, path: reported, operation: "\(operation) \(temporary)")
        }
    }

    /// `true` for a name of the exact form of a temporary of the database named `name`.
    static func isTemporaryName(_ candidate: String, of name: String) -> Bool {
        let prefix = "." + name + "."
        guard candidate.hasPrefix(prefix), let suffix = suffixes.first(where: { candidate.hasSuffix($0) }) else { return false }
        let middle = candidate.dropFirst(prefix.count).dropLast(suffix.count)
        return middle.count == 8 && middle.allSatisfy(\.isHexDigit)
    }

    /// Removes the temporaries of `path` (and their SQLite side files) that no live process holds
    /// locked. Returns the removed paths.
    @discardableResult
    static func removeStale(of path: String, files: FileOperations = .system) -> [String] {
        let (folder, name) = folderAndName(of: path)
        var removed: [String] = []
        for candidate in TemporaryNames.shared.names(in: folder, startingWith: "." + name + ".") where isTemporaryName(candidate, of: name) {
            let temporary = folder + "/" + candidate
            let abandoned = LockedNewFile.removeIfAbandoned(temporary) {
                // The temporary's own journal first: a journal without its database is harmless,
                // the other way round SQLite would find a hot journal for a file that is gone.
                for suffix in ["-journal", "-wal", "-shm"] { files.removeIfPresent(temporary + suffix) }
                files.removeIfPresent(temporary)
            }
            if abandoned { removed.append(temporary) }
        }
        if !removed.isEmpty { try? files.fsyncDirectory(folder) }
        return removed
    }

    /// The folder and the name of `path`, as `FileSystem.folder(of:)` and `URL.lastPathComponent`
    /// give them; a plain absolute path (no `.`, `..` or empty component, no trailing slash) is
    /// split at its last slash without Foundation's `URL` (~15 µs an open).
    static func folderAndName(of path: String) -> (folder: String, name: String) {
        let utf8 = path.utf8
        if isPlainAbsolute(utf8), let slash = utf8.lastIndex(of: UInt8(ascii: "/")) {
            let folder = slash == utf8.startIndex ? "/" : String(path[..<slash])
            return (folder, String(path[utf8.index(after: slash)...]))
        }
        return (FileSystem.folder(of: path), URL(fileURLWithPath: path).lastPathComponent)
    }

    /// `true` for `/a/b/c`: starts with a slash, and every component is neither empty, `.` nor `..`.
    private static func isPlainAbsolute(_ utf8: String.UTF8View) -> Bool {
        let slash = UInt8(ascii: "/"), dot = UInt8(ascii: ".")
        guard utf8.first == slash else { return false }
        var length = 0, dots = 0
        for byte in utf8.dropFirst() {
            if byte == slash {
                guard length > 0, dots != length || dots > 2 else { return false }
                length = 0
                dots = 0
            } else {
                length += 1
                if byte == dot { dots += 1 }
            }
        }
        return length > 0 && (dots != length || dots > 2)
    }
}
