import Foundation

/// A tmpfs of a chosen size (and, optionally, number of inodes) mounted by the test on a fresh
/// folder, to fill a disk for real. Needs root and permission to mount; ``mount(size:inodes:)``
/// returns `nil` with the reason otherwise, and the test skips that case saying so.
public final class SmallFilesystem: @unchecked Sendable {
    /// The mount point.
    public let path: String
    private let holder: TemporaryDirectory
    private var mounted = true

    private init(path: String, holder: TemporaryDirectory) {
        self.path = path
        self.holder = holder
    }

    /// Mounts a tmpfs of `size` bytes (and at most `inodes` inodes, the root folder included).
    /// - Returns: the file system, or the reason it could not be mounted.
    public static func mount(size: Int, inodes: Int? = nil) -> Result<SmallFilesystem, FixtureError> {
        let holder = TemporaryDirectory("tmpfs")
        let point = holder.file("mnt")
        try? FileManager.default.createDirectory(atPath: point, withIntermediateDirectories: false)
        var options = "size=\(size),mode=0755"
        if let inodes { options += ",nr_inodes=\(inodes)" }
        guard let mountCommand = ProcessRunner.which("mount") else { return .failure(FixtureError(message: "mount(8) is not installed")) }
        guard let result = try? ProcessRunner.run(mountCommand, ["-t", "tmpfs", "-o", options, "tmpfs", point]), result.status == 0 else {
            return .failure(FixtureError(message: "cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN)"))
        }
        return .success(SmallFilesystem(path: point, holder: holder))
    }

    /// A path inside the file system.
    public func file(_ name: String) -> String { path + "/" + name }

    /// The names in the mount point, sorted.
    public func listing() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }

    /// Writes a file that takes every free block, so that the next write fails with ENOSPC.
    public func fill(name: String = "filler") {
        let descriptor = open(file(name), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        let block = [UInt8](repeating: 0xAB, count: 4096)
        while block.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) > 0 {}
        var byte: UInt8 = 0xAB
        while write(descriptor, &byte, 1) > 0 {}
    }

    /// Unmounts (also done when the value goes away).
    public func unmount() {
        guard mounted else { return }
        mounted = false
        if let umount = ProcessRunner.which("umount") { _ = try? ProcessRunner.run(umount, [path]) }
    }

    deinit { unmount() }
}
