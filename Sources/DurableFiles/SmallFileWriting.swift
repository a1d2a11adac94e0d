import Foundation

extension FileOperations {
    /// Writes `bytes` as the whole content of the file `target`, durably and completely or not at
    /// all: into a new temporary beside it (`.<name>.<8 hex>.new`, created exclusively with `mode`,
    /// and owned like `ownerOf` where allowed), flushed, then published under `target` by
    /// ``publish(_:as:replacing:synchronize:)`` (linked without replacing an existing file, or with
    /// `replacing` renamed over it), and the folder flushed. On failure the temporary is removed
    /// and `target` is as it was.
    ///
    /// For small files that are written whole: a new key file (never replacing one), or the
    /// edited Keys file (replacing it). `bytes` is lent, never copied: key material stays in the
    /// caller's zeroed buffer.
    /// - Throws: ``PublishFailure``: ``PublishFailure/targetExists`` when `target` exists and
    ///   `replacing` is off; after ``PublishFailure/folderNotSynced(_:)`` the file is in place.
    package func writeWholeFile(_ bytes: UnsafeRawBufferPointer, as target: String, mode: mode_t, ownerOf owner: String?, replacing: Bool) throws(PublishFailure) {
        let name = URL(fileURLWithPath: target).lastPathComponent
        var generator = SystemRandomNumberGenerator()
        let random = (0..<4).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
        let temporary = FileSystem.folder(of: target) + "/.\(name).\(random).new"
        let file: any RandomAccessFile
        do {
            file = try createFile(temporary, mode, owner)
        } catch {
            throw .notPublished(error)
        }
        var published = false
        defer {
            file.close()
            if !published { removeIfPresent(temporary) }
        }
        do {
            try file.write(bytes, at: 0)
            try file.synchronize()
        } catch {
            throw .notPublished(error)
        }
        do {
            try publish(temporary, as: target, replacing: replacing, synchronize: false)
            published = true
        } catch {
            if case .folderNotSynced = error { published = true }
            throw error
        }
    }

    /// Removes the temporaries ``writeWholeFile(_:as:mode:ownerOf:replacing:)`` left in `folder`
    /// when a process writing them was killed (`.<name>.<8 hex>.new` that no live process holds
    /// locked; a file another process is writing right now stays). Returns the names removed.
    @discardableResult
    package func removeAbandonedWholeFileTemporaries(in folder: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        var removed: [String] = []
        for name in names where Self.isWholeFileTemporary(name) {
            let path = folder + "/" + name
            if LockedNewFile.removeIfAbandoned(path, remove: { removeIfPresent(path) }) { removed.append(name) }
        }
        if !removed.isEmpty { try? fsyncDirectory(folder) }
        return removed
    }

    /// `true` for a name `writeWholeFile` gives its temporaries: `.<name>.<8 hex digits>.new`.
    static func isWholeFileTemporary(_ name: String) -> Bool {
        guard name.hasPrefix("."), name.hasSuffix(".new") else { return false }
        let parts = name.dropLast(4).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 3, let random = parts.last, random.count == 8 else { return false }
        return random.allSatisfy { $0.isHexDigit }
    }
}
