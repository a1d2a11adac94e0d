@testable import CipherFormats
import DurableFiles
@testable import EncryptedSQLite
import Foundation
import Testing
import TestSupport

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
        (TestFiles.contents(path)).map { [UInt8]($0) } ?? []
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

/// One recorded event in the form the power-cut tests compare with the steps their path must
/// take: what was done (write, sync, rename…) to which file, by its role (``PowerCutStep/role(of:)``),
/// not its name (temporaries have random names) nor its bytes.
struct PowerCutStep: Hashable, CustomStringConvertible, Sendable {
    enum Kind: String, Sendable {
        case observe, create, write, sync, syncFolder = "sync folder", rename, link, unlink
    }

    let kind: Kind
    /// The file's role; for a rename or link, `source→target`; empty for a folder sync.
    let role: String

    init(_ kind: Kind, _ role: String = "") {
        self.kind = kind
        self.role = role
    }

    var description: String { role.isEmpty ? kind.rawValue : "\(kind.rawValue) \(role)" }

    /// The role of the file `name`: `database` (`app.sqlite`), `journal`, `wal`, `Keys`, `key file`
    /// (`*.key`), `temporary` (a library temporary: `.<name>.<hex>.new` or `*.rekey-*`), or the
    /// name itself.
    static func role(of name: String) -> String {
        if name == "app.sqlite" { return "database" }
        if name == "Keys" { return "Keys" }
        if name.hasSuffix("-journal") { return name.contains(".rekey-") ? "temporary journal" : "journal" }
        if name.hasSuffix("-wal") { return name.contains(".rekey-") ? "temporary wal" : "wal" }
        if name.contains(".rekey-") || (name.hasPrefix(".") && name.hasSuffix(".new")) { return "temporary" }
        if name.hasSuffix(".key") { return "key file" }
        return name
    }
}

/// A run of one step: the step and how many times it came in a row.
struct PowerCutStepRun: Hashable, CustomStringConvertible, Sendable {
    let step: PowerCutStep
    let count: Int

    init(_ step: PowerCutStep, _ count: Int = 1) {
        self.step = step
        self.count = count
    }

    var description: String { count == 1 ? step.description : "\(step) ×\(count)" }
}

extension PowerCutRecorder {
    /// The recorded events as steps, in order (a file's role from its name when the event
    /// happened, or when the recorder saw it created).
    var steps: [PowerCutStep] {
        var createdNames: [Inode: String] = [:]
        return recorded.map { moment in
            func name(_ inode: Inode) -> String {
                moment.listing.first { $0.value == inode }?.key ?? createdNames[inode] ?? "inode \(inode)"
            }
            let role = { (inode: Inode) in PowerCutStep.role(of: name(inode)) }
            switch moment.event {
            case .observed(let inode, _): return PowerCutStep(.observe, role(inode))
            case .created(let created, let inode):
                createdNames[inode] = created
                return PowerCutStep(.create, PowerCutStep.role(of: created))
            case .write(let inode, _, _): return PowerCutStep(.write, role(inode))
            case .syncHandle(let inode), .syncPath(let inode, _): return PowerCutStep(.sync, role(inode))
            case .syncFolder: return PowerCutStep(.syncFolder)
            case .rename(let source, let target, _): return PowerCutStep(.rename, "\(PowerCutStep.role(of: source))→\(PowerCutStep.role(of: target))")
            case .link(let source, let target, _): return PowerCutStep(.link, "\(PowerCutStep.role(of: source))→\(PowerCutStep.role(of: target))")
            case .unlink(let removed): return PowerCutStep(.unlink, PowerCutStep.role(of: removed))
            }
        }
    }

    /// ``steps`` with each run of the same step in a row folded into one, with its count.
    var stepRuns: [PowerCutStepRun] {
        var runs: [PowerCutStepRun] = []
        for step in steps {
            if let last = runs.last, last.step == step {
                runs[runs.count - 1] = PowerCutStepRun(step, last.count + 1)
            } else {
                runs.append(PowerCutStepRun(step))
            }
        }
        return runs
    }

    /// The step runs, one per line, for a failure message.
    var stepListing: String { stepRuns.map(\.description).joined(separator: "\n") }
}

/// A run of steps a path must take: the step, and how many times in a row (a fixed part: one
/// count; a variable part: the range its structure allows).
struct ExpectedStepRun: CustomStringConvertible, Sendable {
    let step: PowerCutStep
    let counts: ClosedRange<Int>

    init(_ kind: PowerCutStep.Kind, _ role: String = "", count: Int = 1) {
        self.init(kind, role, counts: count...count)
    }

    init(_ kind: PowerCutStep.Kind, _ role: String = "", counts: ClosedRange<Int>) {
        step = PowerCutStep(kind, role)
        self.counts = counts
    }

    var description: String {
        counts == 1...1 ? step.description : counts.count == 1 ? "\(step) ×\(counts.lowerBound)" : "\(step) ×\(counts.lowerBound)…\(counts.upperBound)"
    }

    /// `DurableFiles`' whole-file write (`writeWholeFile`) of `target`'s role: a new temporary,
    /// one write, its flush, then a link (new file, `replacing: false`) and the temporary's
    /// unlink, or a rename (`replacing: true`), then the folder's flush.
    static func wholeFileWrite(of target: String, replacing: Bool) -> [ExpectedStepRun] {
        [ExpectedStepRun(.create, "temporary"), ExpectedStepRun(.write, "temporary"), ExpectedStepRun(.sync, "temporary")]
            + (replacing
                ? [ExpectedStepRun(.rename, "temporary→\(target)")]
                : [ExpectedStepRun(.link, "temporary→\(target)"), ExpectedStepRun(.unlink, "temporary")])
            + [ExpectedStepRun(.syncFolder)]
    }

    /// A page re-encryption of a file of `fileSize` bytes in pages of `pageSize`: the journal
    /// (header, then one write per chunk of `chunkBytes / pageSize` pages), made durable and
    /// linked as `-journal`; one write per chunk to the database and its flush; the journal
    /// renamed aside (the commit), the folder's flush, the renamed journal removed.
    static func pageReencryption(fileSize: Int, pageSize: Int, chunkBytes: Int = PageReencryption.defaultChunkBytes) -> [ExpectedStepRun] {
        let pages = fileSize / pageSize
        let chunkPages = max(1, chunkBytes / pageSize)
        let chunks = (pages + chunkPages - 1) / chunkPages
        return [
            ExpectedStepRun(.observe, "database"),
            ExpectedStepRun(.create, "temporary journal"),
            ExpectedStepRun(.write, "temporary journal", count: 1 + chunks),
            ExpectedStepRun(.sync, "temporary journal"),
            ExpectedStepRun(.link, "temporary journal→journal"),
            ExpectedStepRun(.unlink, "temporary journal"),
            ExpectedStepRun(.syncFolder),
            ExpectedStepRun(.write, "database", count: chunks),
            ExpectedStepRun(.sync, "database"),
            ExpectedStepRun(.rename, "journal→temporary"),
            ExpectedStepRun(.syncFolder),
            ExpectedStepRun(.unlink, "temporary"),
        ]
    }
}

extension PowerCutRecorder {
    /// Whether the recorded steps are, run for run, `expected` (each run's count in its range).
    func stepsMatch(_ expected: [ExpectedStepRun]) -> Bool {
        let runs = stepRuns
        return runs.count == expected.count && zip(runs, expected).allSatisfy { $0.step == $1.step && $1.counts.contains($0.count) }
    }

    /// Records an issue unless the recorded steps match `expected`, listing both.
    func expectSteps(_ expected: [ExpectedStepRun], _ path: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(stepsMatch(expected), "\(path): the recorded steps are not the ones the path must take.\nExpected:\n\(expected.map(\.description).joined(separator: "\n"))\nRecorded:\n\(stepListing)", sourceLocation: sourceLocation)
    }
}
