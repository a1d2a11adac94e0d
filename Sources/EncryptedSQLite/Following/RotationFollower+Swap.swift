import CipherFormats
import DurableFiles
import Foundation
import KeyConfiguration
import SQLCipherConnection

extension RotationFollower {
    // MARK: Background rotation: the swap

    /// With the writer's lock held: the last pages, the check, the swap. Every access waits meanwhile.
    func swapWithWriterLock(_ copy: BackgroundCopy, keys: KeyList, from: ResolvedKey, figures: (steps: Int, longest: Duration, start: Stopwatch)) throws(EncryptedDatabaseError) -> StepOutcome {
        let pause = Stopwatch()
        var phases: [String] = []
        func phase(_ name: String) { phases.append("\(name) \(Int(pause.elapsed.milliseconds))") }
        readers?.drain()
        phase("readers")
        backgroundSlot.copy = nil
        var swapped = false
        defer {
            if !swapped {
                if !writer.connection.isClosed, writer.connection.isInTransaction { try? writer.connection.execute("ROLLBACK") }
                copy.discard()
                reopenWriterAfterFailure()
                readers?.resume(keyedWith: ReaderPool.key(for: writer.key, path: path, options: options))
            }
        }
        func step<T>(_ operation: String, _ body: () throws -> T) throws(EncryptedDatabaseError) -> T {
            do { return try body() } catch { throw EncryptedDatabaseError.from(error, path: path, operation: operation) }
        }
        // The library's other databases on the file step aside (StepAsideLock) before the last
        // pages are copied, so that none writes after them; they open the new file once this one
        // has. Their accesses wait meanwhile, so this waits for them briefly, then falls back.
        switch stepAside?.announce(within: min(options.busyTimeout, .seconds(1))) {
        case .replacingElsewhere?: return .fellBack(reason: "another process is replacing the file")
        case .stillInUse?: return .fellBack(reason: "other processes that use the file through this library did not step aside in time")
        case .clear?, nil: break
        }
        defer { stepAside?.withdraw() }
        phase("others aside")
        // Every frame into the database file first, so that no -wal is left for the new file.
        let journalMode = try step("reading the journal mode") { try writer.connection.journalMode() }
        if journalMode == "wal" {
            let busy: Int
            do {
                busy = try writer.connection.query("PRAGMA wal_checkpoint(TRUNCATE)").first?.get(0, as: Int.self) ?? 1
            } catch {
                // See `unreadableReason`: the writer is opened again when the swap gives up.
                writer.connection.close()
                return .fellBack(reason: Self.unreadableReason("\(error)"))
            }
            if busy != 0 { return .fellBack(reason: "another process is reading the WAL-mode file") }
        }
        phase("checkpoint")
        // No commit of another process may land after the last pages unseen, since the copy would
        // replace the file without it:
        // - in rollback-journal mode, the read transaction of the last pages stays open until the
        //   writer closes for the swap; its SHARED lock keeps every other connection from
        //   committing, and from then on the gate (`SoleUse`) keeps them from starting;
        // - in WAL mode, where a SHARED lock stops no commit, the wal-index header, read before
        //   the last pages and again once the lease proves nobody has the file open, tells
        //   whether anyone committed (or emptied the WAL after committing) since: then no swap.
        let walIndex = journalMode == "wal" ? WALIndexHeader(databasePath: path) : nil
        defer { walIndex?.keepUntilExit() }  // unless closed below, once this process has no connection
        let check: String? = switch options.verification {
        case .quickCheck: "PRAGMA quick_check"
        case .integrityCheck: "PRAGMA integrity_check"
        case .schema, .pages: nil
        }
        // With a check, which reads the whole copy in the pause anyway, the row counts too: no
        // other fact shows a row missing from the copy.
        let original: BackgroundCopy.Facts
        do throws(EncryptedDatabaseError) {
            original = try step("reading the database for the background rotation's swap") { () throws -> BackgroundCopy.Facts in
                try writer.connection.execute("BEGIN")
                let facts = try BackgroundCopy.Facts(writer.connection, countingRows: check != nil)
                try copy.complete()
                if journalMode == "wal" { try writer.connection.execute("COMMIT") }
                return facts
            }
        } catch .ioFailure(_, _, let detail) {
            // See `unreadableReason`: the writer is opened again when the swap gives up.
            if writer.connection.isInTransaction { try? writer.connection.execute("ROLLBACK") }
            writer.connection.close()
            return .fellBack(reason: Self.unreadableReason(detail))
        }
        phase("last pages")
        options.files.written(copy.temporary)  // a test seam (it damages the copy here); nothing in production
        // The report's `bytes` is the database's size, as for every other rotation; the copy's own
        // size goes into the background figures.
        let bytes = FileSystem.size(of: path) ?? 0
        let temporaryBytes = FileSystem.size(of: copy.temporary) ?? 0
        try copy.synchronize()
        phase("flush")
        let verifyTime = Stopwatch()
        try copy.verify(against: original, check: check)
        let verifyDuration = verifyTime.elapsed
        phase("check")

        let lease: SoleUseLease
        switch SoleUse.prove(path, closing: {
            if writer.connection.isInTransaction { try? writer.connection.execute("ROLLBACK") }
            writer.connection.close()
        }) {
        case .held(let held): lease = held
        case .inUse(let why): return .fellBack(reason: why)
        case .unprovable(let why): return .fellBack(reason: "whether another process has the file open cannot be proven: \(why)")
        }
        phase("closed")
        if let walIndex {
            let changed = walIndex.changed()
            walIndex.close()  // the lease proves that no connection of this process is left
            if changed {
                lease.release()
                return .fellBack(reason: "another process wrote the file during the swap")
            }
        }
        defer { lease.release() }
        // With the lease, no other process can have a transaction open: a side file that is not
        // empty now is not another process's work in progress. The WAL was checkpointed and
        // truncated above (SQLite may not remove it on the last close: the PENDING byte is held),
        // and that is made durable before the copy appears under the name.
        let folder = FileSystem.folder(of: path)
        for suffix in ["-wal", "-journal"] where FileSystem.size(of: path + suffix) != nil {
            // A WAL-mode process that had the file open before the gate can still commit, and
            // close before the lease: its frames stay in the -wal, which the swap must not leave.
            guard FileSystem.size(of: path + suffix) == 0 else { return .fellBack(reason: "another process wrote the file during the swap (its \(suffix) file is not empty)") }
            try? options.files.fsync(path + suffix)
        }
        do {
            try options.files.fsyncDirectory(folder)
        } catch {
            throw .ioFailure(path: path, operation: "flushing the folder before the swap", detail: error.description)
        }
        do {
            try copy.publish()
        } catch .folderNotSynced(let error) {
            logger.warning("folder fsync failed after the swap", metadata: ["path": "\(path)", "error": "\(error)"])
        } catch {
            throw .ioFailure(path: path, operation: "swapping in the background copy", detail: error.description)
        }
        swapped = true
        // A process whose open waited on the lease holds the replaced file: it finds no database
        // there, and the locks stop it from touching the new file's side files. Its descriptor
        // stays open, the locks held, until the database is closed; the blocks are freed after the
        // writer lock is released (see `StepOutcome.swapped`).
        let replaced = SoleUse.fenceReplaced(lease, pageSize: from.cipher.effective.pageSize ?? 4096, path: path, logger: logger)
        phase("swapped")

        let to = keys.current
        guard let opened = try KeyedConnections(path: path, access: .readWrite, busyTimeout: options.busyTimeout).open(with: copy.key) else {
            throw .verificationFailed(path: path, keyID: to.id, detail: "the swapped-in copy does not open with the new key")
        }
        if journalMode == "wal", (try? opened.journalMode()) != "wal" {
            _ = try? opened.queryValue("PRAGMA journal_mode = WAL", as: String.self)
        }
        var report = RotationReport(
            fromKeyID: from.id, toKeyID: to.id, journalMode: journalMode, bytes: bytes, rekeyDuration: figures.start.elapsed,
            verifyDuration: verifyDuration, verification: check == nil ? .schema : options.verification,
            totalDuration: figures.start.elapsed, method: .backgroundCopy)
        report.background = BackgroundRotationFigures(
            steps: figures.steps, longestStep: figures.longest, swapPause: pause.elapsed, copyDuration: figures.start.elapsed, temporaryBytes: temporaryBytes)
        writer.swap(to: opened, key: to, report: writer.report.with(rotation: report))
        readers?.resume(keyedWith: ReaderPool.key(for: to, path: path, options: options))
        phase("reopened")
        do {
            try setup.runOnWriter(opened, path: path)
        } catch {
            logger.error("prepareConnection failed on the rotated writer", metadata: ["path": "\(path)", "error": "\(error)"])
        }
        logger.notice("rotated database key in the background", metadata: [
            "path": "\(path)", "from": "\(from.id)", "to": "\(to.id)", "steps": "\(figures.steps)",
            "longest_step_ms": "\(figures.longest.milliseconds)", "swap_ms": "\(pause.elapsed.milliseconds)",
            "swap_phases_ms": "\(phases.joined(separator: ", "))",
        ])
        return .swapped(report, replaced: replaced)
    }
}
