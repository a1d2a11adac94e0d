import Foundation

/// Runs code in this process with the file-system permissions of another user, without affecting
/// the other threads: on a new thread whose file-system user and group ids (Linux `setfsuid`,
/// per thread) are set to `nobody`, which also drops root's permission overrides for that thread.
///
/// `access(2)` still answers for the real user (root); only opens, creates and the like are
/// checked as `nobody`. Tests of unwritable folders therefore run the `rekey` command as `nobody`
/// (`setpriv`) instead.
public enum OtherUser {
    /// `nobody`'s user and group id on Debian.
    public static let nobody: UInt32 = 65534

    /// `true` when this process may switch (it runs as root).
    public static var isAvailable: Bool { getuid() == 0 }

    /// The shell prefix that runs a command as `nobody` (util-linux's `setpriv`), for
    /// ``RekeyCLI/runWrapped(_:_:in:environment:)``.
    public static let commandPrefix = "exec /usr/bin/setpriv --reuid=\(nobody) --regid=\(nobody) --clear-groups"

    /// `true` when a child process can be run as `nobody` with ``commandPrefix``: this process is
    /// root and `setpriv` is installed.
    public static var canRunCommands: Bool { isAvailable && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") }

    /// Runs `body` as `nobody` (for file permissions) on a thread of its own and returns its result.
    public static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) throws -> T {
        let box = ResultBox<T>()
        let thread = Thread {
            _ = setFileSystemGroup(nobody)
            _ = setFileSystemUser(nobody)
            box.set(Result { try body() })
            _ = setFileSystemUser(0)
            _ = setFileSystemGroup(0)
        }
        thread.stackSize = 8 << 20
        thread.start()
        return try box.wait().get()
    }

    // glibc's setfsuid/setfsgid (per thread; not exported by the Glibc module).
    private typealias SetID = @convention(c) (UInt32) -> Int32
    private static let setFileSystemUser = unsafeBitCast(dlsym(UnsafeMutableRawPointer(bitPattern: 0), "setfsuid"), to: SetID.self)
    private static let setFileSystemGroup = unsafeBitCast(dlsym(UnsafeMutableRawPointer(bitPattern: 0), "setfsgid"), to: SetID.self)

    private final class ResultBox<T: Sendable>: @unchecked Sendable {
        private let condition = NSCondition()
        // Invariant: only touched with `condition` locked.
        private var result: Result<T, any Error>?

        func set(_ value: Result<T, any Error>) {
            condition.withLock {
                result = value
                condition.broadcast()
            }
        }

        func wait() -> Result<T, any Error> {
            condition.withLock {
                while result == nil { condition.wait() }
                return result!
            }
        }
    }
}
