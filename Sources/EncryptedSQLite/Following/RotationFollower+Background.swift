import CipherFormats
import DurableFiles
import Foundation
import KeyConfiguration
import SQLCipherConnection

/// The background rotation a ``RotationFollower`` runs, and the copy it is writing.
final class BackgroundRotationSlot: @unchecked Sendable {
    private let lock = NSLock()
    // Invariant: only touched with `lock` held.
    private var current: BackgroundRotation?
    /// The copy being written. Invariant: only touched with the writer's lock held.
    var copy: BackgroundCopy?
    /// The files background rotations replaced, each cut down to its zeroed first page and locked
    /// (see the swap), closed with the database. Invariant: only touched with the writer's lock held.
    var replacedFiles: [ReplacedFile] = []

    var rotation: BackgroundRotation? {
        get { lock.withLock { current } }
        set { lock.withLock { current = newValue } }
    }
}

extension RotationFollower {
    // MARK: Background rotation

    /// `EncryptedDatabase.rotateInBackground()`: reads the key list again and starts the rotation,
    /// unless one runs already (returned) or the file is on the current key (`nil`). `owner` is kept
    /// alive until the rotation ends.
    /// - Throws: ``EncryptedDatabaseError/keyUnavailable(path:reason:)`` when the key list cannot be read.
    func rotateInBackground(owner: any AnyObject & Sendable) throws(EncryptedDatabaseError) -> BackgroundRotation? {
        try writer.withLock { () throws(EncryptedDatabaseError) -> BackgroundRotation? in
            if let running = backgroundSlot.rotation, !running.state.isFinal { return running }
            let keys = try source.load(path: path, afterRotationElsewhere: false)
            self.keys.withLock { $0 = keys }
            guard !keys.isCurrent(writer.key) else { return nil }
            return startBackgroundRotationWithWriterLock(keys: keys, owner: owner)
        }
    }

    /// Starts the background rotation of a database just opened on an older key.
    func startBackgroundRotation(keys: KeyList, owner: any AnyObject & Sendable) {
        writer.withLock { _ = startBackgroundRotationWithWriterLock(keys: keys, owner: owner) }
    }

    private func startBackgroundRotationWithWriterLock(keys: KeyList, owner: any AnyObject & Sendable) -> BackgroundRotation {
        let rotation = BackgroundRotation(path: path, fromKeyID: writer.key.id, toKeyID: keys.currentID)
        backgroundSlot.rotation = rotation
        logger.notice("rotating database key in the background", metadata: ["path": "\(path)", "from": "\(writer.key.id)", "to": "\(keys.currentID)"])
        // The thread holds the database until the rotation ends.
        let thread = Thread {
            withExtendedLifetime(owner) { self.runBackgroundRotation(rotation, keys: keys) }
        }
        thread.name = "EncryptedSQLite.backgroundRotation"
        thread.start()
        return rotation
    }

    /// With the writer's lock held: ends the background rotation that is copying, discarding its copy
    /// (another rotation is about to change the file or the writer).
    func abandonBackgroundRotation(reason: String) {
        guard let rotation = backgroundSlot.rotation, !rotation.state.isFinal else { return }
        backgroundSlot.copy?.discard()
        backgroundSlot.copy = nil
        logger.notice("background rotation abandoned", metadata: ["path": "\(path)", "reason": "\(reason)"])
        rotation.update(.abandoned(reason: reason))
    }

    /// Why a rotation from `from` to `to` cannot be copied in the background, or `nil`.
    static func backgroundIneligibility(from: ResolvedKey, to: ResolvedKey) -> String? {
        if from.isPlaintext { return "an unencrypted file is encrypted by an export" }
        if to.cipherKey == nil { return "decrypting a file is done by an export" }
        if !from.writesSameFormat(as: to) { return "the new key's cipher settings differ from the file's, which an export changes" }
        return nil
    }

    /// Tunables of the copy: each step aims at `stepTarget` under the writer lock, then leaves the
    /// lock free for `stepGap`; the copy's file is flushed to disk every `flushBytes`.
    private static let stepTarget = Duration.milliseconds(8)
    private static let stepGap: useconds_t = 1000
    private static let flushBytes: Int64 = 8 << 20
    /// At most this much is copied in one step, however fast the last steps were: a step that
    /// meets uncached pages or a busy disk then stays short.
    private static let maximumStepBytes = 4 << 20
    /// How many times the copy may start over (another process wrote) before the ordinary rotation runs instead.
    private static let maximumRestarts = 3
    /// Why the ordinary rotation replaces a copy that could not read the database. SQLite 3.15.2
    /// reported short reads of the -wal to the writer (in a step of the copy, its last pages, or
    /// the swap's checkpoint) after another connection of this process had committed and
    /// checkpointed the file during the copy, and went on reporting them on that connection. The
    /// copy is given up, the writer is closed (a close checkpoints nothing it cannot read, and
    /// removes no -wal then) and opened again, and the ordinary rotation, which checks what it
    /// writes, runs on the new connection.
    static func unreadableReason(_ detail: String) -> String {
        "the background copy could not read the database (\(detail)); the ordinary rotation runs on a new connection"
    }

    /// For tests, by database path (tests run in parallel): called on the rotation's thread after
    /// each step of the copy that did not end it, without the writer's lock (a test writes through
    /// another connection there, so that the next step starts over). Empty in production.
    static let afterCopyStep = Locked<[String: @Sendable () -> Void]>([:])

    /// The background thread's work: copy in steps, then swap (or fall back).
    private func runBackgroundRotation(_ rotation: BackgroundRotation, keys: KeyList) {
        let start = Stopwatch()
        let to = keys.current
        let from = writer.withLock { writer.key }
        let outcome: BackgroundRotation.State
        let spaceShortfall = RotationContext.spaceShortfall(bytes: FileSystem.size(of: path) ?? 0, in: FileSystem.folder(of: path), for: "a second copy of the file")
        if let reason = Self.backgroundIneligibility(from: from, to: to) ?? spaceShortfall {
            outcome = fallBack(rotation, keys: keys, reason: reason)
        } else {
            do {
                outcome = try copyAndSwap(rotation, keys: keys, from: from, since: start)
            } catch {
                // The copy is of no use now: end it and remove it.
                let rotatedElsewhere = writer.withLock { () -> Bool in
                    backgroundSlot.copy?.discard()
                    backgroundSlot.copy = nil
                    return !writer.connection.isClosed && !writerReadsFile
                }
                if rotatedElsewhere {
                    outcome = .abandoned(reason: "another process rotated the file")
                } else {
                    logger.error("background rotation failed; the file stays on its old key", metadata: ["path": "\(path)", "error": "\(error)"])
                    outcome = .failed(error)
                }
            }
        }
        if case .finished(let report) = outcome {
            Telemetry.rotated(method: report.method.rawValue, fromKey: report.fromKeyID, toKey: report.toKeyID, bytes: report.bytes, duration: report.totalDuration)
        }
        rotation.update(outcome)
    }

    /// Runs the ordinary rotation (holding the database for the whole rewrite) and records why.
    private func fallBack(_ rotation: BackgroundRotation, keys: KeyList, reason: String) -> BackgroundRotation.State {
        logger.notice("background rotation not possible; rotating in the foreground", metadata: ["path": "\(path)", "reason": "\(reason)"])
        do {
            return try writer.withLock { () throws(EncryptedDatabaseError) -> BackgroundRotation.State in
                guard !rotation.state.isFinal else { return rotation.state }
                guard let report = try rotate(keys: keys, fallbackReason: reason) ?? writer.report.rotation else {
                    return .abandoned(reason: "the file was already on the current key")
                }
                return .finished(report)
            }
        } catch {
            return .failed(error)
        }
    }

    enum StepOutcome {
        case copied(remaining: Int, total: Int)
        /// `replaced`: the last descriptor of the replaced file, to close after the writer lock.
        case swapped(RotationReport, replaced: ReplacedFile)
        case fellBack(reason: String)
        case ended
    }

    private func copyAndSwap(_ rotation: BackgroundRotation, keys: KeyList, from: ResolvedKey, since start: Stopwatch) throws(EncryptedDatabaseError) -> BackgroundRotation.State {
        let copy = try BackgroundCopy.create(path: path, from: from, to: keys.current, busyTimeout: options.busyTimeout, files: options.files)
        let pageSize = copy.key.cipher.effective.pageSize ?? 4096
        var pages: Int32 = 64
        var steps = 0
        var longest = Duration.zero
        var started = false
        var unflushed: Int64 = 0
        var remaining = Int.max
        while true {
            // The time the step holds the lock, not the time it waited for it.
            var elapsed = Duration.zero
            let outcome: StepOutcome = try writer.withLock { () throws(EncryptedDatabaseError) -> StepOutcome in
                let held = Stopwatch()
                defer { elapsed = held.elapsed }
                guard !rotation.state.isFinal else { return .ended }
                guard writer.key.id == from.id, !writer.connection.isClosed else {
                    copy.discard()
                    backgroundSlot.copy = nil
                    return .ended
                }
                if rotation.isCancelled {
                    abandonBackgroundRotation(reason: "cancelled")
                    return .ended
                }
                if !started {
                    try copy.attach(to: writer.connection)
                    backgroundSlot.copy = copy
                    started = true
                }
                // The last pages are copied in the swap, under this same lock, so that no write
                // can land between the end of the copy and the swap.
                if remaining <= Int(pages) {
                    let figures = (steps: steps, longest: longest, start: start)
                    return try swapWithWriterLock(copy, keys: keys, from: from, figures: figures)
                }
                do throws(EncryptedDatabaseError) {
                    _ = try copy.step(pages: pages)
                } catch .ioFailure(_, _, let detail) {
                    copy.discard()
                    backgroundSlot.copy = nil
                    writer.connection.close()
                    reopenWriterAfterFailure()
                    return .fellBack(reason: Self.unreadableReason(detail))
                }
                steps += 1
                if copy.remaining == 0 {
                    // The copy finished inside this step (the file is smaller than one step): swap now.
                    return try swapWithWriterLock(copy, keys: keys, from: from, figures: (steps: steps, longest: longest, start: start))
                }
                unflushed += Int64(pages) * Int64(pageSize)
                // Flush before the swap too, so that the swap's own flush has little left to write.
                if unflushed >= Self.flushBytes || copy.remaining <= 2 * Int(pages) {
                    try copy.flushCache()
                    unflushed = Self.flushBytes
                }
                return .copied(remaining: copy.remaining, total: copy.pageCount)
            }
            switch outcome {
            case .ended:
                return rotation.state.isFinal ? rotation.state : .abandoned(reason: "another rotation changed the file")
            case .swapped(let report, let replaced):
                // Freeing the replaced file's blocks takes time in proportion to its size: after the writer
                // lock, while the database serves, and in steps (see `ReplacedFile`). Its zeroed
                // first page and its locks stay until the database is closed.
                replaced.shrink()
                writer.withLock { backgroundSlot.replacedFiles.append(replaced) }
                return .finished(report)
            case .fellBack(let reason):
                return fallBack(rotation, keys: keys, reason: reason)
            case .copied(let left, let total):
                longest = max(longest, elapsed)
                // A write through another connection (another process) makes SQLite start the
                // copy again; a process that keeps writing would keep it from ever ending.
                if copy.restarts >= Self.maximumRestarts {
                    writer.withLock {
                        copy.discard()
                        backgroundSlot.copy = nil
                    }
                    return fallBack(rotation, keys: keys, reason: "another process writes the file (the copy started over \(copy.restarts) times)")
                }
                Self.afterCopyStep.withLock { $0[path] }?()
                remaining = left
                if unflushed >= Self.flushBytes {
                    try copy.synchronize()
                    unflushed = 0
                }
                // Aim each step at `stepTarget`.
                let scale = Self.stepTarget / max(elapsed, .microseconds(100))
                pages = Int32(min(max(Double(pages) * min(max(scale, 0.5), 2), 16), Double(Self.maximumStepBytes / pageSize)))
                rotation.update(.copying(BackgroundRotationProgress(copiedPages: max(0, total - left), totalPages: total, elapsed: start.elapsed)))
                usleep(Self.stepGap)
            }
        }
    }
}
