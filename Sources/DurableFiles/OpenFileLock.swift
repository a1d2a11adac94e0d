import Foundation

/// Open file description locks (`F_OFD_SETLK`, `F_OFD_SETLKW`, `F_OFD_GETLK`) on single bytes:
/// they belong to the descriptor, not to the process, so two descriptors of one process conflict
/// as two processes would, and closing another descriptor of the file keeps them. Linux's command
/// numbers (36–38), which Glibc's module does not export.
enum OpenFileLock {
    private static let get: Int32 = 36
    private static let set: Int32 = 37
    private static let setWaiting: Int32 = 38

    /// Sets (`F_RDLCK`, `F_WRLCK`) or releases (`F_UNLCK`) the lock on `byte` without waiting;
    /// `false` when another lock is in the way or the file system refuses.
    static func set(_ descriptor: Int32, byte: Int64, type: Int32) -> Bool {
        var lock = request(byte: byte, type: type)
        return fcntl(descriptor, set, &lock) == 0
    }

    /// Sets the lock on `byte`, waiting as long as another lock is in the way; `false` when the
    /// file system refuses.
    static func wait(_ descriptor: Int32, byte: Int64, type: Int32) -> Bool {
        var lock = request(byte: byte, type: type)
        while true {
            if fcntl(descriptor, setWaiting, &lock) == 0 { return true }
            guard errno == EINTR else { return false }
        }
    }

    /// The type of a lock of another descriptor that would be in the way of a `type` lock on
    /// `byte` (`F_RDLCK` or `F_WRLCK`), or `nil` when none is.
    static func conflict(_ descriptor: Int32, byte: Int64, type: Int32) -> Int32? {
        var lock = request(byte: byte, type: type)
        guard fcntl(descriptor, get, &lock) == 0, lock.l_type != Int16(F_UNLCK) else { return nil }
        return Int32(lock.l_type)
    }

    private static func request(byte: Int64, type: Int32) -> flock {
        var lock = flock()
        lock.l_type = Int16(type)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = off_t(byte)
        lock.l_len = 1
        return lock
    }
}
