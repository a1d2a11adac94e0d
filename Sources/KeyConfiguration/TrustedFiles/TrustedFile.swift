import CipherFormats
import Foundation

/// Whether the owner and mode checks of files holding key material are made (on by default).
///
/// The checks follow OpenSSH's `StrictModes` (the Keys File guide lists them). Turning them off is
/// meant for tests and demos on shared folders; `rekey --no-strict-modes` does it and says so on
/// standard error. Reading stays as careful either way: regular files only, opened without
/// blocking, size caps.
///
/// ```swift
/// StrictModes.isEnabled = false   // a demo on files with loose modes
/// ```
public enum StrictModes {
    private static let state = State()

    /// `true` (the default) while the owner and mode rules are enforced in this process.
    public static var isEnabled: Bool {
        get { state.enabled }
        set { state.enabled = newValue }
    }

    private final class State: @unchecked Sendable {
        private let lock = NSLock()
        // Invariant: only touched with `lock` held.
        private var value = true
        var enabled: Bool {
            get { lock.withLock { value } }
            set { lock.withLock { value = newValue } }
        }
    }
}

/// The one way a file holding key material is read: the `Keys` file and every key file.
///
/// It opens the file without blocking (`O_NONBLOCK`, so a named pipe cannot hang the process),
/// refuses anything but a regular file, checks the size cap, the owner and mode of the file and of
/// its folders (``StrictModes``), and reads the bytes straight into a zeroed ``SecretBytes``.
struct TrustedFile {
    /// The content, in a buffer zeroed when released.
    package let bytes: SecretBytes
    /// The permission bits, for the readability rule the caller applies once it knows whether
    /// the file holds material (``requireNotReadableByOthers()``).
    package let mode: UInt32

    /// Why a file could not be read: it is missing, could not be opened or read (`reason`: the
    /// system's words), or is not trusted.
    package enum Failure: Error {
        case missing
        case unreadable(reason: String)
        case untrusted(FileTrustProblem)
    }

    /// Reads the file at `path` after checking it as the type says; `readableByOthersAllowed`
    /// `false` refuses a file its group or others can read (key files).
    package static func read(path: String, limit: Int, readableByOthersAllowed: Bool) throws(Failure) -> TrustedFile {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard descriptor >= 0 else {
            let code = errno
            if code == ENOENT { throw .missing }
            if code == ENXIO { throw .untrusted(.notARegularFile(kind: "a socket or a device without a reader")) }
            throw .unreadable(reason: String(cString: strerror(code)))
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw .unreadable(reason: String(cString: strerror(errno))) }
        guard (status.st_mode & S_IFMT) == S_IFREG else { throw .untrusted(.notARegularFile(kind: kindName(status.st_mode))) }
        let mode = UInt32(status.st_mode & 0o7777)
        if StrictModes.isEnabled {
            let user = geteuid()
            guard status.st_uid == user || status.st_uid == 0 else { throw .untrusted(.ownedByOtherUser(owner: status.st_uid, user: user)) }
            guard mode & 0o022 == 0 else { throw .untrusted(.writableByOthers(mode: mode & 0o777)) }
            if !readableByOthersAllowed, mode & 0o044 != 0 { throw .untrusted(.readableByOthers(mode: mode & 0o777)) }
            try checkFolders(of: path, user: user)
        }
        guard Int(status.st_size) <= limit else { throw .untrusted(.tooLarge(bytes: Int(status.st_size), limit: limit)) }
        var failure: Int32 = 0
        var total = 0
        let bytes = SecretBytes(count: Int(status.st_size)) { buffer in
            while total < buffer.count {
                let count = Foundation.read(descriptor, buffer.baseAddress! + total, buffer.count - total)
                if count < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                if count == 0 { break }
                total += count
            }
        }
        guard failure == 0 else { throw .unreadable(reason: String(cString: strerror(failure))) }
        guard total == bytes.count else { throw .unreadable(reason: "the file changed size while it was read") }
        return TrustedFile(bytes: bytes, mode: mode)
    }

    /// Throws ``FileTrustProblem/readableByOthers(mode:)`` when strict modes are on and the
    /// file's group or others can read it.
    func requireNotReadableByOthers() throws(FileTrustProblem) {
        if StrictModes.isEnabled, mode & 0o044 != 0 { throw .readableByOthers(mode: mode & 0o777) }
    }

    /// Checks the folders from the file's own up to the first one owned by root: each must be
    /// owned by this user or root and not writable by group or others, unless it is sticky
    /// (like `/tmp`, where others cannot rename or delete this user's files). Both the folders of
    /// the path as given and, for a symbolic link, those of the file it leads to.
    private static func checkFolders(of path: String, user: uid_t) throws(Failure) {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        var starts: [String] = []
        for candidate in [(absolute as NSString).deletingLastPathComponent, absolute] {
            guard let resolved = realpath(candidate.isEmpty ? "/" : candidate, nil) else { continue }
            let text = String(cString: resolved)
            free(resolved)
            let folder = candidate == absolute ? (text as NSString).deletingLastPathComponent : text
            if !starts.contains(folder) { starts.append(folder.isEmpty ? "/" : folder) }
        }
        for start in starts { try checkFolderChain(from: start, user: user) }
    }

    private static func checkFolderChain(from start: String, user: uid_t) throws(Failure) {
        var folder = start
        while true {
            var status = stat()
            guard stat(folder, &status) == 0 else { throw .unreadable(reason: "cannot check folder \(folder): \(String(cString: strerror(errno)))") }
            guard status.st_uid == user || status.st_uid == 0 else {
                throw .untrusted(.folderOwnedByOtherUser(folder: folder, owner: status.st_uid, user: user))
            }
            let mode = UInt32(status.st_mode & 0o7777)
            if mode & 0o022 != 0 && mode & UInt32(S_ISVTX) == 0 {
                throw .untrusted(.folderWritableByOthers(folder: folder, mode: mode))
            }
            if status.st_uid == 0 || folder == "/" { return }
            folder = (folder as NSString).deletingLastPathComponent
            if folder.isEmpty { folder = "/" }
        }
    }

    private static func kindName(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFDIR: return "a directory"
        case S_IFIFO: return "a named pipe (FIFO)"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFSOCK: return "a socket"
        default: return "not a regular file"
        }
    }
}
