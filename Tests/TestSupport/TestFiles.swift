import Foundation

/// Reads and copies files through close-on-exec descriptors.
///
/// Foundation opens files without `O_CLOEXEC` (`FileManager.contents(atPath:)`, `copyItem`,
/// `FileHandle`), and `Process` closes a child's inherited descriptors from a listing of
/// `/proc/self/fd` made before it spawns. A descriptor another test opens in between is inherited
/// by the child, which keeps the file open while it runs: a rotation of that file then finds
/// "another process has the file open" (a full 3.4.1 run failed `CipherSettingsTests` so). Tests
/// read and copy database files here.
///
/// ```swift
/// let before = TestFiles.contents(path)
/// try TestFiles.copy(template, to: path)
/// ```
public enum TestFiles {
    /// What ``copy(_:to:)`` throws.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The file's bytes, or `nil` when it cannot be read. Non-blocking, as Foundation's reader
    /// is: a named pipe (a bad-input fixture) gives what is in it at once, never a wait for a writer.
    public static func contents(_ path: String) -> Data? {
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count < 0 && errno == EAGAIN { return data }
            guard count >= 0 else { return nil }
            if count == 0 { return data }
            data.append(contentsOf: buffer[0..<count])
        }
    }

    /// Copies the file at `source` to a new file at `target` (which must not exist), with the
    /// source's permission bits, as `FileManager.copyItem(atPath:toPath:)` does.
    public static func copy(_ source: String, to target: String) throws {
        guard let data = contents(source) else { throw Failure(description: "cannot read \(source): \(String(cString: strerror(errno)))") }
        var status = stat()
        guard stat(source, &status) == 0 else { throw Failure(description: "cannot stat \(source)") }
        let descriptor = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, status.st_mode & 0o7777)
        guard descriptor >= 0 else { throw Failure(description: "cannot create \(target): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        // The mode requested at creation passes through the umask; copyItem keeps the source's.
        _ = fchmod(descriptor, status.st_mode & 0o7777)
        var written = 0
        while written < data.count {
            let count = data.withUnsafeBytes { write(descriptor, $0.baseAddress! + written, data.count - written) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw Failure(description: "cannot write \(target): \(String(cString: strerror(errno)))") }
            written += count
        }
    }
}
