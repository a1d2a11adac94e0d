import Foundation
import Yams

// Edits for master-key rotation: a key-encryption key appended to `key_encryption_keys:` (made
// when absent), and wrapped values replaced where they are written. Like every edit of the Keys
// file's text, comments, blank lines and layout stay; the caller checks the result by loading it.

extension KeysFileEditing {
    /// A new wrapped value for key `keyIndex` of database entry `entryIndex`.
    struct WrappedValueReplacement: Sendable {
        let entryIndex: Int
        let keyIndex: Int
        package let value: WrappedDataKey

        package init(entryIndex: Int, keyIndex: Int, value: WrappedDataKey) {
            self.entryIndex = entryIndex
            self.keyIndex = keyIndex
            self.value = value
        }
    }

    /// `text` with each replacement's `wrapped_by:` and `wrapped_key:` values written over the
    /// old ones (as double-quoted scalars, each on its own line as before), and, with
    /// `keyEncryptionKey`, that key-encryption key entry appended as the last (current) KEK: after
    /// the last item of `key_encryption_keys:`, or in a new `key_encryption_keys:` list before
    /// `databases:`. The text is parsed once for both edits.
    /// - Throws: ``Problem/unsupportedLayout(_:)`` when a value is not a one-line scalar of a block
    ///   mapping, or the KEK list is not a block list.
    static func rewrapping(
        _ replacements: [WrappedValueReplacement], appendingKeyEncryptionKey keyEncryptionKey: [(name: String, value: String)]?, in text: String
    ) throws -> String {
        guard let root = try Yams.compose(yaml: text, .basic), let databases = value(of: "databases", in: root)?.sequence else {
            throw Problem.unsupportedLayout("databases: is not a list")
        }
        let newline = text.contains("\r\n") ? "\r\n" : "\n"
        var lines = text.components(separatedBy: newline)
        // Replacements keep the number of lines, so the KEK's place found below stays right.
        for replacement in replacements {
            guard replacement.entryIndex < databases.count,
                  let keys = value(of: "keys", in: databases[replacement.entryIndex])?.sequence, replacement.keyIndex < keys.count
            else { throw Problem.unsupportedLayout("a key entry is not where the file was read") }
            let entry = keys[replacement.keyIndex]
            for (field, newValue) in [("wrapped_by", replacement.value.keyEncryptionKeyID), ("wrapped_key", replacement.value.text)] {
                guard let node = value(of: field, in: entry), let scalar = node.scalar, let mark = node.mark else {
                    throw Problem.unsupportedLayout("\(field) is not a plain value")
                }
                let line = mark.line - 1
                let start = lines[line].utf8.index(lines[line].utf8.startIndex, offsetBy: mark.column - 1)
                let rest = lines[line][start...]
                guard let end = scalarEnd(in: rest, style: scalar.style) else {
                    throw Problem.unsupportedLayout("\(field) is not written on one line")
                }
                lines[line] = String(lines[line][..<start]) + KeysFileKeyLines.quoted(newValue) + String(lines[line][end...])
            }
        }
        if let keyEncryptionKey { try insertKeyEncryptionKey(keyEncryptionKey, root: root, into: &lines) }
        return lines.joined(separator: newline)
    }

    /// Where a one-line scalar that starts at the beginning of `text` ends, or `nil` when it goes
    /// on past the line.
    private static func scalarEnd(in text: Substring, style: Node.Scalar.Style) -> String.Index? {
        switch style {
        case .doubleQuoted:
            var index = text.index(after: text.startIndex)
            while index < text.endIndex {
                if text[index] == "\\" { index = text.index(index, offsetBy: 2, limitedBy: text.endIndex) ?? text.endIndex; continue }
                if text[index] == "\"" { return text.index(after: index) }
                index = text.index(after: index)
            }
            return nil
        case .singleQuoted:
            var index = text.index(after: text.startIndex)
            while index < text.endIndex {
                if text[index] == "'" {
                    let next = text.index(after: index)
                    if next < text.endIndex, text[next] == "'" { index = text.index(after: next); continue }
                    return next
                }
                index = text.index(after: index)
            }
            return nil
        case .plain:
            // A plain scalar ends at ` #` (a comment) or the end of the line, without trailing blanks.
            var end = text.endIndex
            if let comment = text.range(of: " #") { end = comment.lowerBound }
            while end > text.startIndex, text[text.index(before: end)] == " " || text[text.index(before: end)] == "\t" {
                end = text.index(before: end)
            }
            return end
        default:
            return nil
        }
    }

    /// Inserts a key-encryption key entry into `lines` (the text `root` was composed from) as the
    /// last (current) KEK.
    private static func insertKeyEncryptionKey(_ fields: [(name: String, value: String)], root: Node, into lines: inout [String]) throws {
        guard let mapping = root.mapping else {
            throw Problem.unsupportedLayout("the file is not a mapping")
        }
        func item(dashIndent: Int) -> [String] {
            fields.enumerated().map { index, field in
                (index == 0 ? String(repeating: " ", count: dashIndent) + "- " : String(repeating: " ", count: dashIndent + 2)) + "\(field.name): \(field.value)"
            }
        }
        if let existing = value(of: "key_encryption_keys", in: root) {
            guard let list = existing.sequence, list.style != .flow, let last = list.last, let listMark = list.mark, let itemMark = last.mark else {
                throw Problem.unsupportedLayout("key_encryption_keys: is not a block list (`- id: …` lines)")
            }
            let dashIndent = listMark.column - 1
            let after = lastLine(ofItemStartingAt: itemMark.line - 1, dashIndent: dashIndent, in: lines)
            lines.insert(contentsOf: item(dashIndent: dashIndent), at: after + 1)
        } else {
            guard let databasesKey = mapping.first(where: { $0.key.string == "databases" })?.key, let mark = databasesKey.mark, mark.column == 1 else {
                throw Problem.unsupportedLayout("databases: is not at the start of a line")
            }
            lines.insert(contentsOf: ["key_encryption_keys:"] + item(dashIndent: 2) + [""], at: mark.line - 1)
        }
    }
}
