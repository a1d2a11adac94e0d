import Foundation

// Edits for master-key rotation: a key-encryption key appended to `key_encryption_keys:` (made
// when absent), and wrapped values replaced where they are written. Like every edit of the Keys
// file's text, comments, blank lines and layout stay. The places come from the load's one parse
// (KeysFileLayout): the text is not parsed again here, and the caller checks the result
// (MasterKeyRotation: the changed spans against the values, the rest byte for byte).

extension KeysFileEditing {
    /// A new wrapped value for key `keyIndex` of database entry `entryIndex`.
    struct WrappedValueReplacement: Sendable {
        let entryIndex: Int
        let keyIndex: Int
        package let value: WrappedDataKey
        /// The value it replaces, as loaded.
        let previous: WrappedDataKey?

        package init(entryIndex: Int, keyIndex: Int, value: WrappedDataKey, previous: WrappedDataKey? = nil) {
            self.entryIndex = entryIndex
            self.keyIndex = keyIndex
            self.value = value
            self.previous = previous
        }
    }

    /// A rewrap's edit: the new text and, for its check, what was replaced and inserted, as byte
    /// offsets in the text before.
    struct RewrapEdit {
        /// One replaced value: `start..<end` held the old scalar (in its quotes), `new` the text
        /// written in its place.
        struct Span {
            enum Field { case wrappedBy, wrappedKey }
            let replacement: Int
            let field: Field
            let start: Int
            let end: Int
            let quoting: KeysFileLayout.ScalarPlace.Quoting
            let new: String
        }

        let text: String
        /// Sorted by offset, never overlapping.
        let spans: [Span]
        /// The lines of an appended KEK entry and where they went in the text before.
        let insertion: (offset: Int, bytes: [UInt8])?
    }

    /// `text` with each replacement's `wrapped_by:` and `wrapped_key:` values written over the
    /// old ones (as double-quoted scalars, each on its own line as before), and, with
    /// `keyEncryptionKey`, that key-encryption key entry appended as the last (current) KEK: after
    /// the last item of `key_encryption_keys:`, or in a new `key_encryption_keys:` list before
    /// `databases:`. `layout` is the one the text was loaded with: nothing is parsed here.
    /// - Throws: ``Problem/unsupportedLayout(_:)`` when a value is not a one-line scalar of a block
    ///   mapping, values are shared through an alias, or the KEK list is not a block list.
    static func rewrapping(
        _ replacements: [WrappedValueReplacement], appendingKeyEncryptionKey keyEncryptionKey: [(name: String, value: String)]?,
        in text: String, layout: KeysFileLayout
    ) throws -> RewrapEdit {
        let bytes = Array(text.utf8)
        let lines = LineStarts(bytes)
        var spans: [RewrapEdit.Span] = []
        spans.reserveCapacity(2 * replacements.count)
        for (index, replacement) in replacements.enumerated() {
            guard replacement.entryIndex < layout.wrappedValues.count, replacement.keyIndex < layout.wrappedValues[replacement.entryIndex].count,
                  let places = layout.wrappedValues[replacement.entryIndex][replacement.keyIndex]
            else { throw Problem.unsupportedLayout("a key entry is not where the file was read") }
            for (field, place, newValue) in [
                (RewrapEdit.Span.Field.wrappedBy, places.wrappedBy, replacement.value.keyEncryptionKeyID),
                (.wrappedKey, places.wrappedKey, replacement.value.text),
            ] {
                let name = field == .wrappedBy ? "wrapped_by" : "wrapped_key"
                let old = (field == .wrappedBy ? replacement.previous?.keyEncryptionKeyID : replacement.previous?.text).map { Array($0.utf8) }
                guard let start = lines.offset(line: place.line, column: place.column, in: bytes) else {
                    throw Problem.unsupportedLayout("\(name) is not written on one line")
                }
                let end: Int
                if place.quoting == .plain, let old, !old.isEmpty, start + old.count <= bytes.count, bytes[start..<(start + old.count)].elementsEqual(old) {
                    // A plain scalar whose text is its value, as loaded: it ends there (also in a flow mapping).
                    end = start + old.count
                } else if let found = scalarEnd(in: bytes, from: start, lineEnd: lines.end(ofLineAt: start, in: bytes), quoting: place.quoting) {
                    end = found
                } else {
                    throw Problem.unsupportedLayout("\(name) is not written on one line")
                }
                spans.append(.init(replacement: index, field: field, start: start, end: end, quoting: place.quoting, new: KeysFileKeyLines.quoted(newValue)))
            }
        }
        spans.sort { $0.start < $1.start }
        for (earlier, later) in zip(spans, spans.dropFirst()) where later.start < earlier.end {
            throw Problem.unsupportedLayout("wrapped values are shared through an alias")
        }
        let newline = text.contains("\r\n") ? "\r\n" : "\n"
        let insertion = try keyEncryptionKey.map { fields throws in try kekInsertion(fields, layout: layout, lines: lines, bytes: bytes, newline: newline) }
        var edited: [UInt8] = []
        edited.reserveCapacity(bytes.count + spans.count * 8 + (insertion?.bytes.count ?? 0))
        var copied = 0
        var pendingInsertion = insertion
        for span in spans {
            if let inserted = pendingInsertion, inserted.offset <= span.start {
                edited.append(contentsOf: bytes[copied..<inserted.offset])
                edited.append(contentsOf: inserted.bytes)
                copied = inserted.offset
                pendingInsertion = nil
            }
            edited.append(contentsOf: bytes[copied..<span.start])
            edited.append(contentsOf: span.new.utf8)
            copied = span.end
        }
        if let inserted = pendingInsertion {
            guard inserted.offset >= copied else { throw Problem.unsupportedLayout("the key-encryption key entry would go inside a value") }
            edited.append(contentsOf: bytes[copied..<inserted.offset])
            edited.append(contentsOf: inserted.bytes)
            copied = inserted.offset
        }
        edited.append(contentsOf: bytes[copied...])
        return RewrapEdit(text: String(decoding: edited, as: UTF8.self), spans: spans, insertion: insertion)
    }

    /// Where each line of a text starts, with libyaml's line breaks (LF, CRLF, CR), so that its
    /// marks' lines find their bytes.
    struct LineStarts {
        let starts: [Int]

        init(_ bytes: [UInt8]) {
            var starts = [0]
            var index = 0
            while index < bytes.count {
                if bytes[index] == UInt8(ascii: "\r") {
                    if index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "\n") { index += 1 }
                    starts.append(index + 1)
                } else if bytes[index] == UInt8(ascii: "\n") {
                    starts.append(index + 1)
                }
                index += 1
            }
            self.starts = starts
        }

        var count: Int { starts.count }

        /// The offset of the character at `line` and `column` (from 1, the column in Unicode
        /// scalars, as libyaml counts).
        func offset(line: Int, column: Int, in bytes: [UInt8]) -> Int? {
            guard line >= 1, line <= starts.count, column >= 1 else { return nil }
            var offset = starts[line - 1]
            var scalars = 0
            while scalars < column - 1 {
                guard offset < bytes.count, !isBreak(bytes[offset]) else { return nil }
                offset += 1
                while offset < bytes.count, bytes[offset] & 0xC0 == 0x80 { offset += 1 }
                scalars += 1
            }
            return offset
        }

        /// The offset of the line break (or the end) of the line holding `offset`.
        func end(ofLineAt offset: Int, in bytes: [UInt8]) -> Int {
            var end = offset
            while end < bytes.count, !isBreak(bytes[end]) { end += 1 }
            return end
        }

        /// The bytes of line `index` (from 0), without its break.
        func content(_ index: Int, in bytes: [UInt8]) -> ArraySlice<UInt8> {
            let start = starts[index]
            return bytes[start..<end(ofLineAt: start, in: bytes)]
        }

        private func isBreak(_ byte: UInt8) -> Bool { byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") }
    }

    /// Where a one-line scalar that starts at `start` ends, or `nil` when it goes on past the line.
    private static func scalarEnd(in bytes: [UInt8], from start: Int, lineEnd: Int, quoting: KeysFileLayout.ScalarPlace.Quoting) -> Int? {
        switch quoting {
        case .doubleQuoted:
            var index = start + 1
            while index < lineEnd {
                if bytes[index] == UInt8(ascii: "\\") { index += 2; continue }
                if bytes[index] == UInt8(ascii: "\"") { return index + 1 }
                index += 1
            }
            return nil
        case .singleQuoted:
            var index = start + 1
            while index < lineEnd {
                if bytes[index] == UInt8(ascii: "'") {
                    if index + 1 < lineEnd, bytes[index + 1] == UInt8(ascii: "'") { index += 2; continue }
                    return index + 1
                }
                index += 1
            }
            return nil
        case .plain:
            // A plain scalar ends at ` #` (a comment) or the end of the line, without trailing blanks.
            var end = lineEnd
            var index = start + 1
            while index < lineEnd {
                if bytes[index] == UInt8(ascii: "#"), bytes[index - 1] == UInt8(ascii: " ") || bytes[index - 1] == UInt8(ascii: "\t") { end = index; break }
                index += 1
            }
            while end > start, bytes[end - 1] == UInt8(ascii: " ") || bytes[end - 1] == UInt8(ascii: "\t") { end -= 1 }
            return end
        case .other:
            return nil
        }
    }

    /// The lines of a key-encryption key entry and where they go: after the last item of
    /// `key_encryption_keys:`, or in a new list before `databases:`.
    private static func kekInsertion(
        _ fields: [(name: String, value: String)], layout: KeysFileLayout, lines: LineStarts, bytes: [UInt8], newline: String
    ) throws -> (offset: Int, bytes: [UInt8]) {
        guard layout.topLevelIsBlockMapping else { throw Problem.unsupportedLayout("the file is not a mapping") }
        func item(dashIndent: Int) -> [String] {
            fields.enumerated().map { index, field in
                (index == 0 ? String(repeating: " ", count: dashIndent) + "- " : String(repeating: " ", count: dashIndent + 2)) + "\(field.name): \(field.value)"
            }
        }
        /// `added` as lines before line `index` (from 0).
        func before(line index: Int, _ added: [String]) -> (offset: Int, bytes: [UInt8]) {
            if index < lines.count { return (lines.starts[index], Array((added.joined(separator: newline) + newline).utf8)) }
            let ends = bytes.last == UInt8(ascii: "\n") || bytes.last == UInt8(ascii: "\r")
            return (bytes.count, Array(((ends ? "" : newline) + added.joined(separator: newline) + newline).utf8))
        }
        if layout.keyEncryptionKeysLine != nil {
            guard let list = layout.keyEncryptionKeyList else {
                throw Problem.unsupportedLayout("key_encryption_keys: is not a block list (`- id: …` lines)")
            }
            let dashIndent = list.column - 1
            // The last line of the last item: the following lines indented deeper than its dash;
            // blank and comment lines only when more of the item follows them.
            var last = list.lastItemLine - 1
            var index = last + 1
            while index < lines.count {
                let line = lines.content(index, in: bytes)
                let content = line.drop { $0 == UInt8(ascii: " ") }
                if content.isEmpty || content.first == UInt8(ascii: "#") {
                    index += 1
                    continue
                }
                guard line.count - content.count > dashIndent else { break }
                last = index
                index += 1
            }
            return before(line: last + 1, item(dashIndent: dashIndent))
        }
        guard let databases = layout.databasesKey, databases.column == 1 else {
            throw Problem.unsupportedLayout("databases: is not at the start of a line")
        }
        return before(line: databases.line - 1, ["key_encryption_keys:"] + item(dashIndent: 2) + [""])
    }
}
