import Foundation

/// The hidden names (starting with `.`) of the folders databases are opened in, kept up to date
/// from inotify events instead of a listing of the folder at every open: the first open in a
/// folder lists it once (after its watch is in place, so that nothing created meanwhile is
/// missed), later opens read the events that came since (creations, renames, removals), which
/// costs one `read` instead of a listing (~0.3 ms for a folder of 2,000 files).
///
/// A listing is made, as before, whenever the events cannot be trusted: the folder is on a file
/// system without a block device, whose changes by other machines inotify may not report
/// (only folders on a block device, such as ext4 or XFS, are watched), inotify is unavailable or its limits are reached, more than
/// ``maximumFolders`` folders are watched already, or the event queue overflowed (then every
/// folder is listed again). The names are only candidates: ``RotationTemporaries/removeStale(of:files:)``
/// checks each one (its exact form, that it is a regular file no live process holds locked)
/// before removing it, as it did with a listing.
final class TemporaryNames: @unchecked Sendable {
    static let shared = TemporaryNames()
    /// The most folders watched at once (each watch counts against the user's
    /// `fs.inotify.max_user_watches`, shared with every other program of the user).
    static let maximumFolders = 64

    private let lock = NSLock()
    // Invariant: everything below is only touched with `lock` held.
    /// The inotify descriptor; `-1` when unavailable (then every call lists), `nil` before the first call.
    private var descriptor: Int32?
    /// Watch descriptor and the folder's device and inode, by folder path (two spellings of one
    /// folder share a watch; a path that names another folder now is watched again).
    private var watches: [String: (watch: Int32, device: UInt64, inode: UInt64)] = [:]
    /// The hidden names of each watched folder, by watch descriptor.
    private var names: [Int32: Set<String>] = [:]

    /// The names in `folder` that start with `prefix` (which starts with `.`), as a listing
    /// would give them now; may also hold names removed since, which the caller's checks skip.
    func names(in folder: String, startingWith prefix: String) -> [String] {
        lock.withLock {
            guard let watch = watched(folder) else { return Self.list(folder, startingWith: prefix) }
            return names[watch, default: []].filter { $0.hasPrefix(prefix) }
        }
    }

    /// The folder's watch, its names brought up to date; `nil` when it is not (to be) watched.
    private func watched(_ folder: String) -> Int32? {
        if descriptor == nil {
            let opened = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
            descriptor = opened >= 0 ? opened : -1
        }
        guard let descriptor, descriptor >= 0 else { return nil }
        drain(descriptor)
        var status = stat()
        guard stat(folder, &status) == 0 else { return nil }
        let device = UInt64(status.st_dev), inode = UInt64(status.st_ino)
        if let known = watches[folder], known.device == device, known.inode == inode, names[known.watch] != nil { return known.watch }
        guard watches.count < Self.maximumFolders, Self.isOnBlockDevice(device) else { return nil }
        let mask = UInt32(IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
        let watch = inotify_add_watch(descriptor, folder, mask)
        guard watch >= 0 else { return nil }
        // Listed after the watch is in place: a name created meanwhile is in the listing, or in
        // an event read by the next call, or both.
        guard let listed = Self.hiddenNames(in: folder) else {
            inotify_rm_watch(descriptor, watch)
            return nil
        }
        watches[folder] = (watch, device, inode)
        names[watch, default: []].formUnion(listed)
        return watch
    }

    /// Reads every pending event and applies it.
    private func drain(_ descriptor: Int32) {
        withUnsafeTemporaryAllocation(byteCount: 8192, alignment: 8) { buffer in
            while true {
                let count = read(descriptor, buffer.baseAddress, buffer.count)
                guard count > 0 else { return }
                var offset = 0
                while offset + 16 <= count {
                    let watch = buffer.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                    let mask = buffer.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                    let length = Int(buffer.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                    let field = UnsafeRawBufferPointer(rebasing: buffer[(offset + 16)..<min(count, offset + 16 + length)])
                    let name = String(decoding: field.prefix { $0 != 0 }, as: UTF8.self)
                    offset += 16 + length
                    apply(watch: watch, mask: mask, name: name)
                }
            }
        }
    }

    private func apply(watch: Int32, mask: UInt32, name: String) {
        if mask & UInt32(IN_Q_OVERFLOW) != 0 {
            // Events were lost: every folder is listed again at its next open.
            names.removeAll()
            return
        }
        if mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) != 0 {
            // The folder is gone or moved: its path may name another folder now.
            names[watch] = nil
            watches = watches.filter { $0.value.watch != watch }
            if mask & UInt32(IN_IGNORED) == 0, let descriptor, descriptor >= 0 { inotify_rm_watch(descriptor, watch) }
            return
        }
        guard name.hasPrefix("."), names[watch] != nil else { return }
        if mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0 { names[watch]?.insert(name) }
        if mask & UInt32(IN_DELETE | IN_MOVED_FROM) != 0 { names[watch]?.remove(name) }
    }

    /// `true` for a folder on a block device (ext4, XFS and the like), whose every change inotify
    /// reports; network, FUSE and other file systems without a device (major number 0: NFS, CIFS,
    /// FUSE, but also tmpfs, Btrfs and overlays) are listed at every open instead.
    private static func isOnBlockDevice(_ device: UInt64) -> Bool {
        let major = ((device >> 8) & 0xFFF) | ((device >> 32) & ~UInt64(0xFFF))
        return major != 0
    }

    /// The names in `folder` that start with `.`, or `nil` when it cannot be read.
    private static func hiddenNames(in folder: String) -> [String]? {
        guard let directory = opendir(folder) else { return nil }
        defer { closedir(directory) }
        var found: [String] = []
        while let entry = readdir(directory) {
            guard entry.pointee.d_name.0 == CChar(UInt8(ascii: ".")) else { continue }
            let name = withUnsafeBytes(of: &entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name != ".", name != ".." { found.append(name) }
        }
        return found
    }

    /// A listing of `folder`: the names that start with `prefix` (only those become strings),
    /// empty when it cannot be read, as `FileManager.contentsOfDirectory` would have it.
    static func list(_ folder: String, startingWith prefix: String) -> [String] {
        guard let directory = opendir(folder) else { return [] }
        defer { closedir(directory) }
        let wanted = Array(prefix.utf8)
        var found: [String] = []
        while let entry = readdir(directory) {
            let matches = withUnsafeBytes(of: &entry.pointee.d_name) { name in
                wanted.count < name.count && memcmp(name.baseAddress!, wanted, wanted.count) == 0
            }
            guard matches else { continue }
            found.append(withUnsafeBytes(of: &entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) })
        }
        return found
    }
}
