import Foundation

extension MasterKeyRotation {
    /// The check of a rewrap's edit that parses only what changed (step 4 of
    /// ``rewrap(keysFile:to:newKeyEncryptionKey:environment:created:)``). It passes when:
    ///
    /// - the text that was edited is the text that was loaded (same size and hash);
    /// - the edited text is that text byte for byte outside the edit's spans and inserted lines;
    /// - each span held, before, the value the load read for it, written as one plain or quoted
    ///   scalar and nothing more (so the span was that scalar, whole), and holds now
    ///   `"…"` with the new value, printable ASCII without `"` or backslash (which YAML reads as
    ///   it is written): `wrapped_by:` the target KEK, `wrapped_key:` a value that, read from the
    ///   edited text, unwraps with the target KEK to the data key the old value held;
    /// - every value not already wrapped by the target was replaced, both its fields;
    /// - with a new KEK: its lines went in before `databases:` (a top-level field at the start of
    ///   a line, after any `key_encryption_keys:`), and the edited text up to `databases:`, loaded
    ///   on its own, lists the old KEKs as before and then the new one, its key file as made.
    ///
    /// Then the edited file loads with the same entries, and every wrapped value unwraps to the
    /// data key it held before: the lines that did not change parse as they did, a one-line
    /// scalar replaced by another leaves the structure as it was. When any of this does not hold
    /// (a layout the rewrite did not expect, an alias, a value written unusually, a faulty edit),
    /// ``passes`` is `false` and the caller loads the whole edited text instead, which names what
    /// is wrong.
    struct EditCheck {
        let original: [UInt8]
        let edited: [UInt8]
        let edit: KeysFileEditing.RewrapEdit
        let replacements: [KeysFileEditing.WrappedValueReplacement]
        let replaced: [(keyID: String, dataKey: DataKey)]
        let target: String
        let kek: (any KeyEncryptionKey)?
        let newKeyEncryptionKey: (id: String, file: String)?
        let loaded: KeysFile
        let keysFile: String
        let keysFolder: String

        var passes: Bool {
            guard let kek, replacements.count == replaced.count else { return false }
            let fingerprint = original.withUnsafeBytes { KeysFileLayout.fingerprint(of: $0) }
            guard fingerprint == loaded.layout.fingerprint else { return false }
            // Every value not under the target is replaced, once, both fields.
            let notCurrent = loaded.entries.reduce(0) { count, entry in
                count + entry.keys.count { key in
                    if case .wrapped(let value) = key.source { return value.keyEncryptionKeyID != target }
                    return false
                }
            }
            guard replacements.count == notCurrent, edit.spans.count == 2 * replacements.count else { return false }
            var fields = [UInt8](repeating: 0, count: replacements.count)
            for span in edit.spans { fields[span.replacement] |= span.field == .wrappedBy ? 1 : 2 }
            guard fields.allSatisfy({ $0 == 3 }) else { return false }
            guard let newValues = comparedByteForByte() else { return false }
            // Each new value, as the edited text holds it, unwraps to the same data key.
            for (index, text) in newValues.enumerated() {
                let (keyID, dataKey) = replaced[index]
                guard let value = try? WrappedDataKey(text: text, wrappedBy: target),
                      let unwrapped = try? kek.unwrap(value.bytes, context: KeyWrappingContext(dataKeyID: keyID, keyEncryptionKeyID: target)),
                      unwrapped.bytes.isEqual(to: dataKey.bytes)
                else { return false }
            }
            return newKeyEncryptionKeyListLoads()
        }

        /// Walks the old and the edited text together: equal outside the spans and the inserted
        /// lines, each span as described. The new `wrapped_key:` texts, by replacement; `nil` when
        /// anything differs.
        private func comparedByteForByte() -> [String]? {
            var newValues = [String](repeating: "", count: replacements.count)
            var old = 0
            var new = 0
            /// Copies that are the same: `original[old..<until]` at `edited[new...]`.
            func same(until end: Int) -> Bool {
                let count = end - old
                guard count >= 0, new + count <= edited.count else { return false }
                let equal = original.withUnsafeBytes { a in edited.withUnsafeBytes { b in count == 0 || memcmp(a.baseAddress! + old, b.baseAddress! + new, count) == 0 } }
                old += count
                new += count
                return equal
            }
            func holds(_ bytes: some Collection<UInt8>) -> Bool {
                guard new + bytes.count <= edited.count, edited[new..<(new + bytes.count)].elementsEqual(bytes) else { return false }
                new += bytes.count
                return true
            }
            var insertion = edit.insertion
            for span in edit.spans {
                if let inserted = insertion, inserted.offset <= span.start {
                    guard same(until: inserted.offset), holds(inserted.bytes) else { return nil }
                    insertion = nil
                }
                guard same(until: span.start) else { return nil }
                let replacement = replacements[span.replacement]
                guard let previous = replacement.previous else { return nil }
                let (before, after) = span.field == .wrappedBy
                    ? (previous.keyEncryptionKeyID, replacement.value.keyEncryptionKeyID)
                    : (previous.text, replacement.value.text)
                guard span.end <= original.count, let literal = Self.literal(before, span.quoting),
                      original[span.start..<span.end].elementsEqual(literal.utf8)
                else { return nil }
                guard span.field == .wrappedKey || after == target, Self.isPlain(after), holds("\"\(after)\"".utf8) else { return nil }
                if span.field == .wrappedKey { newValues[span.replacement] = after }
                old = span.end
            }
            if let inserted = insertion {
                guard same(until: inserted.offset), holds(inserted.bytes) else { return nil }
            }
            guard same(until: original.count), new == edited.count else { return nil }
            return newValues
        }

        /// With a new KEK: the edited text up to `databases:`, loaded alone, lists the KEKs loaded
        /// before and then the new one, held in its new file; nothing else changed there.
        private func newKeyEncryptionKeyListLoads() -> Bool {
            guard let newKeyEncryptionKey else { return edit.insertion == nil }
            let layout = loaded.layout
            guard let inserted = edit.insertion, layout.topLevelIsBlockMapping, let databases = layout.databasesKey, databases.column == 1,
                  (layout.keyEncryptionKeysLine ?? 0) < databases.line
            else { return false }
            let lines = KeysFileEditing.LineStarts(original)
            guard databases.line <= lines.count else { return false }
            let databasesOffset = lines.starts[databases.line - 1]
            guard inserted.offset <= databasesOffset, edit.spans.first.map({ $0.start >= databasesOffset }) ?? true else { return false }
            // Before databases: only the insertion changed the text, so it starts at the same offset plus the lines inserted.
            let prefix = String(decoding: edited[..<(databasesOffset + inserted.bytes.count)], as: UTF8.self) + "databases: []\n"
            guard let list = try? KeysFile(yaml: prefix, path: keysFile, baseDirectory: keysFolder), list.entries.isEmpty,
                  list.keyEncryptionKeyEntries.count == loaded.keyEncryptionKeyEntries.count + 1,
                  zip(list.keyEncryptionKeyEntries, loaded.keyEncryptionKeyEntries).allSatisfy({ $0.id == $1.id && $0.description == $1.description }),
                  let added = list.keyEncryptionKeyEntries.last, added.id == newKeyEncryptionKey.id,
                  case .local(.file(let path, .binary), nil) = added.source, path == newKeyEncryptionKey.file
            else { return false }
            return true
        }

        /// `value` written as one scalar in `quoting` with nothing to unescape, or `nil`.
        private static func literal(_ value: String, _ quoting: KeysFileLayout.ScalarPlace.Quoting) -> String? {
            switch quoting {
            case .plain: return value.isEmpty ? nil : value
            case .doubleQuoted: return isPlain(value) ? "\"\(value)\"" : nil
            case .singleQuoted: return isPlain(value) && !value.contains("'") ? "'\(value)'" : nil
            case .other: return nil
            }
        }

        /// Printable ASCII without `"` or a backslash: a double-quoted scalar holding it is read as
        /// it is written.
        static func isPlain(_ value: String) -> Bool {
            value.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
        }
    }
}
