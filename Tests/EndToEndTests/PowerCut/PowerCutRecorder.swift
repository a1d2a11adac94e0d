@testable import CipherFormats
import DurableFiles
@testable import EncryptedSQLite
import Foundation

/// Records the durable file operations one library call makes in one folder, through the
/// library's `FileOperations` seam, so that the state a power cut after any of them would leave
/// can be rebuilt (``PowerCutImage``).
///
/// What it sees: files the library creates itself (a page re-encryption's journal) and every write
/// and sync to them; the database file while the library writes it through SQLite's handle
/// (`observe`), with its content at that moment; `fsync` of files SQLite wrote (with their content
/// at that moment), folder syncs (with the folder's listing), renames, links and unlinks. Before
/// every event it also notes the folder's listing and the content of files it does not track (new
/// files SQLite writes, such as an export's temporary).
///
/// The model of a power cut (what a real disk may keep): a file keeps what it had at its last sync,
/// plus any subset of the writes made to it since (in 4 KiB blocks); a folder keeps its entries as
/// of its last sync, plus a prefix of the renames, links, unlinks and creations made in it since.
/// Files SQLite wrote without a sync through the seam lose any of their blocks.
final class PowerCutRecorder: @unchecked Sendable {
    typealias Inode = UInt64

    enum Event {
        /// The library took over an existing file (the database) with this content.
        case observed(Inode, [UInt8])
        /// The library created a file (its entry is not durable until a folder sync).
        case created(String, Inode)
        case write(Inode, offset: Int64, bytes: [UInt8])
        /// A sync through a handle: everything written to the file so far is durable.
        case syncHandle(Inode)
        /// `fsync` by path of a file SQLite wrote: this content is durable.
        case syncPath(Inode, [UInt8])
        /// A folder sync: this listing is durable.
        case syncFolder([String: Inode])
        /// A rename or link, with the inode the source name had: if the change survives, so does
        /// that file's entry (even when the recorder never saw the file created).
        case rename(String, String, Inode)
        case link(String, String, Inode)
        case unlink(String)
    }

    /// What the folder looked like just before an event.
    struct Moment {
        let event: Event
        let listing: [String: Inode]
        /// Content of files the recorder does not track, by inode.
        let untracked: [Inode: [UInt8]]
    }

    let folder: String
    /// The durable state before the call: names, inodes and content.
    let initialListing: [String: Inode]
    let initialContent: [Inode: [UInt8]]

    private let lock = NSLock()
    // Invariant: only touched with `lock` held.
    private var moments: [Moment] = []
    private var tracked: Set<Inode> = []

    /// Starts recording `folder`, whose current state the caller has made durable.
    init(folder: String) {
        self.folder = folder
        let listing = Self.listing(of: folder)
        initialListing = listing
        var content: [Inode: [UInt8]] = [:]
        for (name, inode) in listing { content[inode] = Self.read(folder + "/" + name) }
        initialContent = content
    }

    /// The events so far, with the folder's state before each.
    var recorded: [Moment] { lock.withLock { moments } }

    /// The folder's state at the end (after the last event).
    func finalMoment() -> (listing: [String: Inode], untracked: [Inode: [UInt8]]) {
        lock.withLock { snapshot() }
    }

    /// File operations that record, then do the real thing.
    func operations() -> FileOperations {
        let system = FileOperations.system
        var operations = system
        operations.fsync = { path throws(FileSystemError) in
            let inode = Self.inode(of: path)
            self.note(.syncPath(inode ?? 0, Self.read(path)))
            try system.fsync(path)
        }
        operations.fsyncDirectory = { path throws(FileSystemError) in
            self.note(.syncFolder(Self.listing(of: path)))
            try system.fsyncDirectory(path)
        }
        operations.rename = { source, target throws(FileSystemError) in
            self.note(.rename(Self.name(source), Self.name(target), Self.inode(of: source) ?? 0))
            try system.rename(source, target)
        }
        operations.linkWithoutReplacing = { source, target throws(FileSystemError) in
            self.note(.link(Self.name(source), Self.name(target), Self.inode(of: source) ?? 0))
            try system.linkWithoutReplacing(source, target)
        }
        operations.removeIfPresent = { path in
            if FileManager.default.fileExists(atPath: path) { self.note(.unlink(Self.name(path))) }
            system.removeIfPresent(path)
        }
        operations.createFile = { path, mode, owner throws(FileSystemError) in
            let file = try system.createFile(path, mode, owner)
            let inode = Self.inode(of: path) ?? 0
            _ = self.lock.withLock { self.tracked.insert(inode) }
            self.note(.created(Self.name(path), inode))
            return RecordingFile(file, inode: inode, recorder: self)
        }
        operations.observe = { file in
            let inode = Self.inode(of: file.path) ?? 0
            // Read through the library's own handle: opening the database by path here would let
            // a close drop SQLite's locks.
            var content = [UInt8](repeating: 0, count: Int((try? file.size()) ?? 0))
            let read = content.withUnsafeMutableBytes { (try? file.read(into: $0, at: 0)) ?? 0 }
            content.removeSubrange(read...)
            _ = self.lock.withLock { self.tracked.insert(inode) }
            self.note(.observed(inode, content))
            return RecordingFile(file, inode: inode, recorder: self)
        }
        return operations
    }

    fileprivate func note(_ event: Event) {
        lock.withLock {
            let state = snapshot()
            moments.append(Moment(event: event, listing: state.listing, untracked: state.untracked))
        }
    }

    // Requires `lock`.
    private func snapshot() -> (listing: [String: Inode], untracked: [Inode: [UInt8]]) {
        let listing = Self.listing(of: folder)
        var untracked: [Inode: [UInt8]] = [:]
        for (name, inode) in listing where !tracked.contains(inode) && initialContent[inode] == nil {
            untracked[inode] = Self.read(folder + "/" + name)
        }
        return (listing, untracked)
    }

    static func listing(of folder: String) -> [String: Inode] {
        var listing: [String: Inode] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] {
            if let inode = inode(of: folder + "/" + name) { listing[name] = inode }
        }
        return listing
    }

    static func inode(of path: String) -> Inode? {
        var status = stat()
        guard lstat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Inode(status.st_ino)
    }

    static func read(_ path: String) -> [UInt8] {
        (FileManager.default.contents(atPath: path)).map { [UInt8]($0) } ?? []
    }

    static func name(_ path: String) -> String { URL(fileURLWithPath: path).lastPathComponent }
}

/// A file handle whose writes and syncs the recorder notes before they happen.
final class RecordingFile: RandomAccessFile, @unchecked Sendable {
    private let base: any RandomAccessFile
    private let inode: PowerCutRecorder.Inode
    private let recorder: PowerCutRecorder

    init(_ base: any RandomAccessFile, inode: PowerCutRecorder.Inode, recorder: PowerCutRecorder) {
        self.base = base
        self.inode = inode
        self.recorder = recorder
    }

    var path: String { base.path }
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(FileSystemError) -> Int { try base.read(into: buffer, at: offset) }
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(FileSystemError) {
        recorder.note(.write(inode, offset: offset, bytes: Array(bytes)))
        try base.write(bytes, at: offset)
    }
    func synchronize() throws(FileSystemError) {
        recorder.note(.syncHandle(inode))
        try base.synchronize()
    }
    func size() throws(FileSystemError) -> Int64 { try base.size() }
    func close() { base.close() }
}

/// How much of what was not yet synced a rebuilt power cut keeps.
enum PowerCutMode: String, CaseIterable, Sendable {
    /// Every write not yet synced is lost, every folder change since the last folder sync undone.
    case dropUnsynced
    /// Any subset of the unsynced 4 KiB blocks and any prefix of the unsynced folder changes
    /// survive (what a disk that reorders writes may keep).
    case randomSubset
}

/// The folder a power cut right before event `cut` (0 = before the first) would leave.
struct PowerCutImage {
    /// Names and contents.
    let files: [String: [UInt8]]

    static let block = 4096

    init(_ recorder: PowerCutRecorder, cut: Int, mode: PowerCutMode, random: inout some RandomNumberGenerator) {
        typealias Inode = PowerCutRecorder.Inode
        let moments = recorder.recorded
        var durableListing = recorder.initialListing
        var durable = recorder.initialContent
        var unsynced: [Inode: [(offset: Int64, bytes: [UInt8])]] = [:]
        var pending: [PowerCutRecorder.Event] = []
        var written: [Inode: [UInt8]] = [:]  // content with every write applied (tracked files)

        for moment in moments.prefix(cut) {
            switch moment.event {
            case .observed(let inode, let content):
                durable[inode] = content
                written[inode] = content
                unsynced[inode] = []
            case .created(let name, let inode):
                durable[inode] = []
                written[inode] = []
                pending.append(.created(name, inode))
            case .write(let inode, let offset, let bytes):
                unsynced[inode, default: []].append((offset, bytes))
                written[inode] = Self.apply([(offset, bytes)], to: written[inode] ?? [])
            case .syncHandle(let inode):
                durable[inode] = written[inode] ?? durable[inode] ?? []
                unsynced[inode] = []
            case .syncPath(let inode, let content):
                durable[inode] = content
                unsynced[inode] = []
            case .syncFolder(let listing):
                durableListing = listing
                pending = []
            case .rename, .link, .unlink:
                pending.append(moment.event)
            }
        }

        // Folder: its durable entries plus a prefix of the changes since.
        let kept = mode == .dropUnsynced ? 0 : Int.random(in: 0...pending.count, using: &random)
        var listing = durableListing
        for change in pending.prefix(kept) {
            switch change {
            case .created(let name, let inode): listing[name] = inode
            case .rename(let source, let target, let inode):
                listing.removeValue(forKey: source)
                listing[target] = inode
            case .link(_, let target, let inode):
                if listing[target] == nil { listing[target] = inode }
            case .unlink(let name): listing.removeValue(forKey: name)
            default: break
            }
        }
        // Files SQLite created that the recorder does not track: present at the cut, maybe kept.
        let volatile = cut < moments.count ? (moments[cut].listing, moments[cut].untracked) : recorder.finalMoment()
        for (name, inode) in volatile.0 where listing[name] == nil && durable[inode] == nil && volatile.1[inode] != nil {
            if mode == .randomSubset && Bool.random(using: &random) { listing[name] = inode }
        }

        var files: [String: [UInt8]] = [:]
        for (name, inode) in listing {
            if let base = durable[inode] {
                let surviving = mode == .dropUnsynced ? [] : (unsynced[inode] ?? []).flatMap { Self.blocks(of: $0) }.filter { _ in Bool.random(using: &random) }
                files[name] = Self.apply(surviving, to: base)
            } else {
                // Written by SQLite, never synced through the seam: any of its blocks may be lost.
                let content = volatile.1[inode] ?? []
                files[name] = mode == .dropUnsynced ? [] : Self.loseBlocks(of: content, random: &random)
            }
        }
        self.files = files
    }

    /// Writes the image into `folder` (which must be empty).
    func materialize(into folder: String) throws {
        for (name, bytes) in files {
            try Data(bytes).write(to: URL(fileURLWithPath: folder + "/" + name))
        }
    }

    private static func apply(_ writes: [(offset: Int64, bytes: [UInt8])], to base: [UInt8]) -> [UInt8] {
        var content = base
        for write in writes {
            let end = Int(write.offset) + write.bytes.count
            if content.count < end { content += [UInt8](repeating: 0, count: end - content.count) }
            content.replaceSubrange(Int(write.offset)..<end, with: write.bytes)
        }
        return content
    }

    /// A write split into the 4 KiB blocks a disk may keep or lose independently.
    private static func blocks(of write: (offset: Int64, bytes: [UInt8])) -> [(offset: Int64, bytes: [UInt8])] {
        stride(from: 0, to: write.bytes.count, by: block).map { start in
            (write.offset + Int64(start), Array(write.bytes[start..<min(start + block, write.bytes.count)]))
        }
    }

    private static func loseBlocks(of content: [UInt8], random: inout some RandomNumberGenerator) -> [UInt8] {
        var result = content
        for start in stride(from: 0, to: content.count, by: block) where Bool.random(using: &random) {
            result.replaceSubrange(start..<min(start + block, content.count), with: [UInt8](repeating: 0, count: min(block, content.count - start)))
        }
        return result
    }
}
