import CipherFormats
import DurableFiles
import Foundation

/// A master-key rotation: every wrapped data key of a Keys file rewrapped to one key-encryption
/// key (KEK), in one durable edit of the Keys file. No database is opened or changed: each data
/// key stays the same, only its wrapping changes, so the cost does not grow with the size or
/// number of the databases.
///
/// The old wrapped values are not kept, so the KEKs they used can be retired at once (check with
/// `rekey keys retire-check --kek <id>`, then delete the old KEK's entry and its material). A
/// master-key rotation does not protect against someone who already unwrapped a data key: they
/// still read the data. Rotate the data keys then (`rekey keys new --wrapped`, `rekey --all`).
///
/// ```swift
/// // The current (last) KEK was added to key_encryption_keys by hand (a token key, say):
/// let rotation = try MasterKeyRotation.rewrap(keysFile: "Keys")
/// print("\(rotation.rewrapped) data keys now wrapped by \(rotation.keyEncryptionKeyID)")
///
/// // Or make a new random KEK in a new file (mode 0600) and rewrap to it:
/// try MasterKeyRotation.rewrap(keysFile: "Keys", newKeyEncryptionKey: .init(id: "kek-2026-11"))
/// ```
public struct MasterKeyRotation: Sendable, Codable, Equatable {
    /// A new random KEK to make in a new file and append to `key_encryption_keys:` before rewrapping.
    public struct NewKeyEncryptionKey: Sendable {
        /// Its id.
        public let id: String
        /// Its file (default: `<id>.key` beside the Keys file); it must not exist.
        public let file: String?

        /// A new KEK `id` in `file`.
        public init(id: String, file: String? = nil) {
            self.id = id
            self.file = file
        }
    }

    /// The Keys file that was edited.
    public let keysFile: String
    /// The KEK every wrapped data key now uses.
    public let keyEncryptionKeyID: String
    /// The KEKs the rewrapped values used before, sorted.
    public let previousKeyEncryptionKeyIDs: [String]
    /// How many wrapped values were rewrapped.
    public let rewrapped: Int
    /// How many were already wrapped by ``keyEncryptionKeyID``.
    public let alreadyCurrent: Int
    /// The new KEK's file, when one was made.
    public let newKeyEncryptionKeyFile: String?

    /// Rewraps every wrapped data key of `keysFile` to the KEK `to` (default: the last of
    /// `key_encryption_keys:`, or the new one):
    ///
    /// 1. loads the Keys file as every load does and unwraps each wrapped value with the KEK it
    ///    names (a value that does not unwrap stops everything: nothing is written);
    /// 2. with `newKeyEncryptionKey`: draws 32 random bytes into a new file (created exclusively,
    ///    mode 0600, flushed, linked into place) and appends its entry to `key_encryption_keys:`;
    /// 3. wraps each data key with the target KEK (a fresh nonce each) and writes the new values
    ///    over the old ones in the Keys file's text, keeping its comments and layout;
    /// 4. checks the edited text: it is the old text with only the old values' spans (and the new
    ///    KEK's lines) changed, each new value unwraps, with the target KEK, to the same data key as
    ///    before, and the KEK list with the new entry loads; what did not change is compared byte
    ///    for byte, not parsed again (an edit that cannot be checked so, in a layout the rewrite does
    ///    not expect, is checked by loading the whole edited text: the same entries, each value
    ///    unwrapping to the same data key);
    /// 5. replaces the Keys file durably (temporary, flush, rename, folder flush), keeping its mode,
    ///    after checking that nobody else changed it meanwhile.
    ///
    /// A crash at any point leaves the old Keys file or the new one, never a mix; a new KEK file
    /// left without its entry is unused and may be deleted.
    /// - Throws: ``KeyMakingError``.
    @discardableResult
    public static func rewrap(
        keysFile: String, to targetID: String? = nil, newKeyEncryptionKey: NewKeyEncryptionKey? = nil,
        environment: [String: String]? = nil, created: Date? = Date()
    ) throws(KeyMakingError) -> MasterKeyRotation {
        try rewrap(keysFile: keysFile, to: targetID, newKeyEncryptionKey: newKeyEncryptionKey, environment: environment, created: created, files: .system)
    }

    /// ``rewrap(keysFile:to:newKeyEncryptionKey:environment:created:)`` through `files`, the
    /// seam the power-cut tests record.
    ///
    /// `alteringEditedText` is a test seam into step 3: it receives the text the rewrite made and
    /// returns the text the rest of the rewrap goes on with, so that a test can stand in for a
    /// faulty rewrite (a value swapped, truncated, left under the old KEK, an id changed) and see
    /// step 4 refuse it. The default returns the text unchanged; production code never passes one.
    /// `checked` is told how step 4 checked the edit: `true` when the changed spans sufficed
    /// (``EditCheck``), `false` when the whole edited text was loaded.
    package static func rewrap(
        keysFile: String, to targetID: String?, newKeyEncryptionKey: NewKeyEncryptionKey?,
        environment: [String: String]?, created: Date?, files: FileOperations,
        alteringEditedText: (String) -> String = { $0 }, checked: (_ bySpans: Bool) -> Void = { _ in }
    ) throws(KeyMakingError) -> MasterKeyRotation {
        let loaded: KeysFile
        do throws(KeyConfigurationError) { loaded = try KeysFile.load(path: keysFile) } catch { throw .keysFile(error) }
        let original = try GeneratedKey.readText(keysFile)
        let keysFolder = FileSystem.folder(of: KeysFile.absolute(keysFile, base: FileManager.default.currentDirectoryPath))
        // Temporaries of an earlier edit that was killed (each held a Keys file or a new KEK).
        files.removeAbandonedWholeFileTemporaries(in: keysFolder)

        // 1. Every wrapped value, unwrapped.
        struct Found { let entryIndex: Int; let keyIndex: Int; let keyID: String; let value: WrappedDataKey; let dataKey: DataKey }
        var found: [Found] = []
        // Each KEK resolved once; the values unwrapped by it directly, not kept in the list's
        // cache of unwrapped keys (a fleet's file has one value per database, each used once here).
        var resolved: [String: any KeyEncryptionKey] = [:]
        for (entryIndex, entry) in loaded.entries.enumerated() {
            for (keyIndex, key) in entry.keys.enumerated() {
                guard case .wrapped(let value) = key.source else { continue }
                do throws(KeyConfigurationError) {
                    let kekID = value.keyEncryptionKeyID
                    let kek: any KeyEncryptionKey
                    if let known = resolved[kekID] {
                        kek = known
                    } else {
                        guard loaded.keyEncryptionKeys.ids.contains(kekID) else {
                            throw .keyEncryptionKeyNotListed(keyEncryptionKeyID: kekID, keyID: key.id, database: entry.configuredPath, listed: loaded.keyEncryptionKeys.ids)
                        }
                        kek = try loaded.keyEncryptionKeys.key(id: kekID, environment: environment)
                        resolved[kekID] = kek
                    }
                    let dataKey: DataKey
                    do {
                        dataKey = try kek.unwrap(value.bytes, context: KeyWrappingContext(dataKeyID: key.id, keyEncryptionKeyID: kekID))
                    } catch {
                        throw .unwrapping(keyID: key.id, keyEncryptionKeyID: kekID, database: entry.configuredPath, problem: KeyEncryptionKeyList.problem(error))
                    }
                    found.append(Found(entryIndex: entryIndex, keyIndex: keyIndex, keyID: key.id, value: value, dataKey: dataKey))
                } catch {
                    throw .keysFile(error)
                }
            }
        }

        // 2. The target KEK.
        var text = original
        var newEntry: [(name: String, value: String)]?
        var kekList = loaded.keyEncryptionKeys
        var newFile: String?
        let target: String
        if let newKeyEncryptionKey {
            guard !loaded.keyEncryptionKeys.ids.contains(newKeyEncryptionKey.id) else {
                throw .notEdited(keysFile: keysFile, problem: "a key-encryption key \"\(newKeyEncryptionKey.id)\" is listed already; choose another id")
            }
            let path = try GeneratedKey.keyFilePath(newKeyEncryptionKey.file, id: newKeyEncryptionKey.id, keysFolder: keysFolder)
            if FileSystem.folder(of: path) != keysFolder { files.removeAbandonedWholeFileTemporaries(in: FileSystem.folder(of: path)) }
            let written = path.hasPrefix(keysFolder + "/") ? String(path.dropFirst(keysFolder.count + 1)) : path
            var fields = [("id", KeysFileKeyLines.quoted(newKeyEncryptionKey.id)), ("file", KeysFileKeyLines.quoted(written)), ("format", "binary")]
            if let created { fields.append(("created", KeyCreationDate.text(of: Calendar.utc.startOfDay(for: created)))) }
            newEntry = fields
            let material = DataKey.random()
            try GeneratedKey.writeNewKeyFile(path, content: material.bytes, files: files)
            newFile = path
            kekList = KeyEncryptionKeyList(loaded.keyEncryptionKeys.ids.compactMap { id in try? loaded.keyEncryptionKeys.key(id: id, environment: environment) }
                + [LocalKeyEncryptionKey(id: newKeyEncryptionKey.id, key: material)])
            target = newKeyEncryptionKey.id
        } else {
            guard let id = targetID ?? loaded.keyEncryptionKeys.currentID else {
                throw .notEdited(keysFile: keysFile, problem: "key_encryption_keys: lists no key-encryption key; add one (or pass a new one) to rewrap to")
            }
            guard loaded.keyEncryptionKeys.ids.contains(id) else {
                throw .keysFile(.keyEncryptionKeyNotListed(keyEncryptionKeyID: id, keyID: "", database: "", listed: loaded.keyEncryptionKeys.ids))
            }
            target = id
        }

        do throws(KeyMakingError) {
            // 3. Wrap to the target and edit the text.
            var replacements: [KeysFileEditing.WrappedValueReplacement] = []
            var replaced: [(keyID: String, dataKey: DataKey)] = []
            for item in found where item.value.keyEncryptionKeyID != target {
                do throws(KeyConfigurationError) {
                    let value = try kekList.wrap(item.dataKey, dataKeyID: item.keyID, with: target, environment: environment)
                    replacements.append(.init(entryIndex: item.entryIndex, keyIndex: item.keyIndex, value: value, previous: item.value))
                    replaced.append((item.keyID, item.dataKey))
                } catch {
                    throw .keysFile(error)
                }
            }
            let edit: KeysFileEditing.RewrapEdit
            do {
                edit = try KeysFileEditing.rewrapping(replacements, appendingKeyEncryptionKey: newEntry, in: text, layout: loaded.layout)
                text = alteringEditedText(edit.text)
            } catch {
                throw .notEdited(keysFile: keysFile, problem: "\(error)")
            }
            // 4. Check the edited text: the changed spans, or (when they cannot tell) all of it.
            let checkedSpans = EditCheck(
                original: Array(original.utf8), edited: Array(text.utf8), edit: edit, replacements: replacements, replaced: replaced,
                target: target, kek: try? kekList.key(id: target, environment: environment), newKeyEncryptionKey: newKeyEncryptionKey.map { ($0.id, newFile ?? "") },
                loaded: loaded, keysFile: keysFile, keysFolder: keysFolder
            ).passes
            checked(checkedSpans)
            if !checkedSpans {
                try check(text, against: loaded, found: found.map { ($0.entryIndex, $0.keyIndex, $0.keyID, $0.dataKey) }, target: target, keks: kekList, keysFile: keysFile, keysFolder: keysFolder)
            }
            // 5. Replace the Keys file.
            if !replacements.isEmpty || newFile != nil {
                guard try GeneratedKey.readText(keysFile) == original else { throw .keysFileChanged(keysFile: keysFile) }
                try GeneratedKey.replaceKeysFile(keysFile, with: text, files: files)
            }
            let previous = Set(found.map(\.value.keyEncryptionKeyID)).subtracting([target]).sorted()
            return MasterKeyRotation(
                keysFile: keysFile, keyEncryptionKeyID: target, previousKeyEncryptionKeyIDs: previous,
                rewrapped: replacements.count, alreadyCurrent: found.count - replacements.count, newKeyEncryptionKeyFile: newFile)
        } catch {
            if let newFile {
                files.removeIfPresent(newFile)
                try? FileSystem.fsyncDirectory(FileSystem.folder(of: newFile))
            }
            throw error
        }
    }

    /// Throws unless `text` loads with the same database entries as `loaded`, each wrapped value
    /// named by the target KEK, and each unwrapping to the data key it held before.
    private static func check(
        _ text: String, against loaded: KeysFile, found: [(Int, Int, String, DataKey)], target: String,
        keks: KeyEncryptionKeyList, keysFile: String, keysFolder: String
    ) throws(KeyMakingError) {
        let edited: KeysFile
        do throws(KeyConfigurationError) {
            edited = try KeysFile(yaml: text, path: keysFile, baseDirectory: keysFolder)
        } catch {
            throw .notEdited(keysFile: keysFile, problem: "the edited file would not load (\(error)); nothing was changed")
        }
        guard edited.entries.map(\.configuredPath) == loaded.entries.map(\.configuredPath) else {
            throw .notEdited(keysFile: keysFile, problem: "the edited file would not have the same database entries; nothing was changed")
        }
        for (entry, before) in zip(edited.entries, loaded.entries) where entry.keys.map(\.id) != before.keys.map(\.id) {
            // The first key id that is not where it was (ids only: no key material).
            let ids = before.keys.map(\.id)
            let changed = ids.enumerated().first { index, id in index >= entry.keys.count || entry.keys[index].id != id }?.element ?? ids.last ?? ""
            throw .notEdited(keysFile: keysFile, problem: "key \"\(changed)\" of \(before.configuredPath) would not keep its id after the edit; nothing was changed")
        }
        for (entryIndex, keyIndex, keyID, dataKey) in found {
            guard case .wrapped(let value) = edited.entries[entryIndex].keys[keyIndex].source, value.keyEncryptionKeyID == target,
                  let kek = try? keks.key(id: target),
                  let unwrapped = try? kek.unwrap(value.bytes, context: KeyWrappingContext(dataKeyID: keyID, keyEncryptionKeyID: target)),
                  unwrapped.bytes.isEqual(to: dataKey.bytes)
            else { throw .notEdited(keysFile: keysFile, problem: "key \"\(keyID)\" would not unwrap to the same data key after the edit; nothing was changed") }
        }
    }
}
