import Foundation

/// A file's mode and size, read with `stat` (what a user would check with `ls -l`).
public enum FileSystemProbe {
    /// The permission bits (`0o600`), or `nil` when the file does not exist.
    public static func mode(of path: String) -> mode_t? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return status.st_mode & 0o7777
    }

    /// The size in bytes, or `nil` when the file does not exist.
    public static func size(of path: String) -> Int64? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return Int64(status.st_size)
    }
}
