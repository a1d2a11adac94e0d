import DurableFiles
import Foundation
import SQLCipherConnection

/// Rewrites a database into a new file with another key and/or other cipher settings, verifies
/// the new file, and swaps it in atomically: the strategy for encrypting a plaintext file,
/// upgrading a SQLCipher 1.x/2.x file, and changing `kdf_iter`, page size or HMAC, none of which
/// an in-place rewrite can do.
///
/// The connection that opened the file holds the database's write lock (`BEGIN IMMEDIATE`) until
/// the swap is done. A WAL-mode file is first switched to rollback-journal mode, which SQLite
/// allows only when no other connection has it open (otherwise
/// ``EncryptedDatabaseError/busy(path:detail:)``); the new file is put back in WAL mode. The copy
/// (``DatabaseExport``) is written under a temporary name, verified, and published over the
/// original (`DurableNewFile`). Why this keeps the file intact through a crash, and what it
/// means for other processes that have the file open, is explained in the Key Rotation article.
struct ExportRotation: Rotation {
    var method: RotationMethod { .export }
    /// How long the export keeps its locks on the replaced file for a process that opened it
    /// during the swap (one that fails on it closes it within milliseconds), before it leaves them
    /// to the end of this process.
    static let lateOpenerLimit: Duration = .seconds(10)

    func rotate(_ connection: Connection, in context: RotationContext) throws(EncryptedDatabaseError) -> RotationResult {
        let start = Stopwatch()
        let path = context.path
        defer { connection.close() }
        let bytes = context.fileSize
        try context.requireWritable(connection)
        // The new file is about as large as the original (larger with a bigger HMAC overhead).
        try context.requireSpace(bytes: bytes + bytes / 16, for: "the new copy")

        // The other databases of this library that have the file open step aside until the new
        // file is in place (StepAsideLock): they close their connections and wait, then open it.
        // Each creates the lock file once it has opened the file: without one, none has it open.
        let stepAside = context.stepAside ?? StepAsideLock(databasePath: path, create: false)
        switch stepAside?.announce(within: context.busyTimeout) {
        case .replacingElsewhere?:
            // Another process is replacing the file: wait for it, then let the open probe again.
            connection.close()
            stepAside?.leave()
            stepAside?.enter()
            throw .changedByAnotherProcess(path: path, keyID: context.from.id, operation: "encrypting or changing cipher settings")
        case .stillInUse?:
            throw .busy(path: path, detail: "other processes that use the file through this library did not step aside within the busy timeout (\(context.busyTimeout)); a rotation that writes a new file waits for them to finish what they are doing. Run it again, or raise the busy timeout. Nothing was changed")
        case .clear?, nil:
            break
        }
        defer { stepAside?.withdraw() }

        let journalMode = try context.step("reading the journal mode") { try connection.journalMode() }
        let wal = try context.leaveWAL(connection)
        if case .heldByAnotherConnection = wal {
            throw .busy(path: path, detail: "the file is in WAL mode and another connection has it open; close other connections before encrypting or changing cipher settings")
        }
        let leftWAL = wal == .left
        var swapped = false
        defer {
            if !swapped, connection.isClosed {
                // Closed by the sole-use check, which then found the file in use.
                if leftWAL, let reopened = try? KeyedConnections(path: path, access: .readWrite, busyTimeout: context.busyTimeout).open(with: context.from) {
                    context.restoreWAL(reopened)
                    reopened.close()
                }
            } else if !swapped {
                if leftWAL {
                    context.restoreWAL(connection)
                } else if !connection.isAutocommit {
                    try? connection.execute("ROLLBACK")
                }
            }
        }
        try context.step("locking the database for the export") { try connection.execute("BEGIN IMMEDIATE") }
        // The mode the connection reported before the lock can be stale: another process may have
        // put the file in WAL mode since this connection last read it. Swapping the file would
        // then take it from under that process's WAL.
        if try context.step("reading the journal mode", { try connection.journalMode() }) == "wal" {
            throw .busy(path: path, detail: "another process put the file in WAL mode and has it open; close other connections before encrypting or changing cipher settings")
        }
        // Read under the lock: nothing can change between these facts and the export.
        let original = try context.step("reading the database's settings") { try DatabaseExport.SourceFacts(connection, journalMode: journalMode) }

        context.logger.notice("rewriting database through an export", metadata: [
            "path": "\(path)", "from": "\(context.from.id)", "to": "\(context.to.id)", "settings": "\(context.to.cipher)", "bytes": "\(bytes)",
        ])
        let copy = try RotationTemporaries.create(for: path, suffix: RotationTemporaries.exportSuffix, mode: FileSystem.permissions(of: path) ?? 0o600,
                                                  ownerOf: path, files: context.files, reported: path, operation: "creating the temporary")
        let temporary = copy.temporaryPath
        defer { copy.close() }

        let exporter = DatabaseExport(path: path, busyTimeout: context.busyTimeout)
        let exportTime = Stopwatch()
        try exporter.export(from: context.from, to: context.to, into: temporary, original: original, walMode: leftWAL)
        let exportDuration = exportTime.elapsed
        context.files.written(temporary)

        let verifyTime = Stopwatch()
        try exporter.verify(temporary, key: context.to, against: original, check: context.engineCheck(pagesReadBack: false))
        let verifyDuration = verifyTime.elapsed

        // No side file of the copy may follow it to the original's name.
        for suffix in ["-journal", "-wal", "-shm"] where FileManager.default.fileExists(atPath: temporary + suffix) {
            throw .ioFailure(path: path, operation: "swapping in the exported file", detail: "the copy still has a \(suffix) file; the original was left in place")
        }
        // Nobody may go on using the file it replaces: prove that no other connection has it open
        // (SoleUse), releasing this connection's lock only once none can start a transaction.
        var lease: SoleUseLease?
        switch SoleUse.prove(path, closing: {
            try? connection.execute("ROLLBACK")
            connection.close()
        }) {
        case .held(let held): lease = held
        case .inUse(let why):
            throw .busy(path: path, detail: "\(why); a rotation that writes a new file (encrypting, upgrading or changing cipher settings) needs the file to itself: stop the processes that use it (fuser \(path)) and run it again, or let one of them rotate it when it opens. Nothing was changed")
        case .unprovable(let why):
            // No lease here: the rename goes ahead as before, and a process that still has the
            // file open keeps the replaced one (its writes fail with SQLite's 1032).
            context.logger.warning("whether another process has the file open cannot be proven; swapping in the exported file anyway", metadata: ["path": "\(path)", "reason": "\(why)"])
        }
        defer { lease?.release() }
        do {
            try copy.publish(as: path, replacing: true)
            swapped = true
        } catch .folderNotSynced(let error) {
            // The rename happened; only the folder's flush failed. The new file is in place.
            swapped = true
            context.logger.warning("folder fsync failed after the swap", metadata: ["path": "\(path)", "error": "\(error)"])
        } catch {
            throw .ioFailure(path: path, operation: "swapping in the exported file", detail: error.description)
        }
        // A process whose open waited on the lease holds the replaced file: it finds no database
        // there, and the locks stop it from touching the new file's side files for as long as it
        // has the replaced file open.
        if let lease {
            let replaced = SoleUse.fenceReplaced(lease, pageSize: original.pageSize, path: path, logger: context.logger)
            if replaced.waitForOtherOpeners(limit: Self.lateOpenerLimit) {
                replaced.close()
            } else {
                replaced.keepUntilExit()
                context.logger.warning(
                    "a process that opened the database during the swap still has the replaced file open; its locks on it are kept until this process ends",
                    metadata: ["path": "\(path)"])
            }
        }
        copy.close()

        let opened: Connection
        do {
            opened = try KeyedConnections(path: path, access: .readWrite, busyTimeout: context.busyTimeout).connect(context.to)
            try opened.verifyReadable()
        } catch {
            throw .verificationFailed(path: path, keyID: context.to.id, detail: "the swapped-in file did not open: \(error)")
        }
        let report = context.report(method: method, journalMode: original.journalMode, bytes: bytes, rewrite: exportDuration, verify: verifyDuration, since: start)
        context.logger.notice("rewrote database through an export", metadata: [
            "path": "\(path)", "from": "\(context.from.id)", "to": "\(context.to.id)",
            "export_ms": "\(Int(exportDuration.milliseconds))", "verify_ms": "\(Int(verifyDuration.milliseconds))",
        ])
        return .rotated(opened, report)
    }
}
