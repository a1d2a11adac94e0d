import Foundation

/// Why a file that holds key material (the `Keys` file or a key file), or a folder above it, is
/// not trusted or cannot be read safely. Each case says what to run to fix it.
///
/// The rules follow OpenSSH's `StrictModes` (see the Keys File guide): whoever can write such a
/// file, or replace it through its folder, chooses the key the next rotation encrypts with.
///
/// ```swift
/// if case .keysFileUntrusted(let path, .readableByOthers) = error {
///     print("run: chmod 600 \(path)")
/// }
/// ```
public enum FileTrustProblem: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not a regular file (`kind`: a named pipe, a device, a directory, a socket).
    case notARegularFile(kind: String)
    /// Larger than the cap for this kind of file.
    case tooLarge(bytes: Int, limit: Int)
    /// Owned by a user other than the one running and root.
    case ownedByOtherUser(owner: UInt32, user: UInt32)
    /// Writable by its group or by others (`mode`: the permission bits).
    case writableByOthers(mode: UInt32)
    /// Readable by its group or by others while it holds key material (`mode`: the permission bits).
    case readableByOthers(mode: UInt32)
    /// A folder above the file is writable by its group or others and not sticky.
    case folderWritableByOthers(folder: String, mode: UInt32)
    /// A folder above the file is owned by a user other than the one running and root.
    case folderOwnedByOtherUser(folder: String, owner: UInt32, user: UInt32)

    /// What is wrong and the command that fixes it, for the file at `path`.
    public func explanation(path: String) -> String {
        switch self {
        case .notARegularFile(let kind):
            return "it is \(kind), not a regular file; give the path of a regular file"
        case let .tooLarge(bytes, limit):
            return "it has \(bytes) bytes, more than the \(limit) allowed; check the path"
        case let .ownedByOtherUser(owner, user):
            return "it is owned by user id \(owner), not by this user (\(user)) or root, so that user chooses the key; run: chown \(user) \(path) (after checking its content)"
        case .writableByOthers(let mode):
            return "it is writable by group or others (mode \(String(mode, radix: 8))), so they choose the key; run: chmod go-w \(path)"
        case .readableByOthers(let mode):
            return "it holds key material and is readable by group or others (mode \(String(mode, radix: 8))); run: chmod 600 \(path)"
        case let .folderWritableByOthers(folder, mode):
            return "its folder \(folder) is writable by group or others (mode \(String(mode, radix: 8))) without the sticky bit, so they can replace the file; run: chmod go-w \(folder)"
        case let .folderOwnedByOtherUser(folder, owner, user):
            return "its folder \(folder) is owned by user id \(owner), not by this user (\(user)) or root, so that user can replace the file; move the file, or run: chown \(user) \(folder)"
        }
    }

    /// What is wrong, without a path.
    public var description: String { explanation(path: "<file>") }
}
