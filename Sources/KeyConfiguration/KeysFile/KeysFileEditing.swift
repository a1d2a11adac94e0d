import Foundation
import Yams

// Appends a key entry to one database entry of a Keys file by editing the file's TEXT at the place
// Yams's node marks point to, so that every comment, blank line, quote and indentation stays as
// the user wrote it. The result is checked by parsing it with the normal loader: the same entries
// as before, plus the new key as the last (current) key of the chosen entry.

/// A key entry to append to a Keys file: the fields a generated key needs.
struct KeysFileKeyLines: Sendable, Equatable {
    /// Where the new key's material is.
    enum Material: Sendable, Equatable {
        /// A key file (its path as it is to be written in the Keys file), read as `format`.
        case file(String, format: KeyFormat)
        /// A data key wrapped by a key-encryption key.
        case wrapped(WrappedDataKey)
    }

    /// The key's id.
    package let id: String
    /// Where its material is.
    package let material: Material
    /// The day the key was made (`YYYY-MM-DD`), or `nil` to write no `created:`.
    package let created: String?

    package init(id: String, file: String, format: KeyFormat, created: String?) {
        self.init(id: id, material: .file(file, format: format), created: created)
    }

    package init(id: String, material: Material, created: String?) {
        self.id = id
        self.material = material
        self.created = created
    }

    /// The entry's fields, in the order they are written.
    var fields: [(name: String, value: String)] {
        var fields = [("id", Self.quoted(id))]
        switch material {
        case let .file(file, format): fields += [("file", Self.quoted(file)), ("format", format.rawValue)]
        case .wrapped(let value): fields += [("wrapped_by", Self.quoted(value.keyEncryptionKeyID)), ("wrapped_key", Self.quoted(value.text))]
        }
        if let created { fields.append(("created", created)) }
        return fields
    }

    /// The key the entry describes once loaded (relative key-file paths taken from `baseDirectory`).
    func databaseKey(baseDirectory: String) -> DatabaseKey {
        let created = created.flatMap(KeyCreationDate.parse)
        switch material {
        case let .file(file, format):
            return DatabaseKey(id: id, source: .file(path: KeysFile.absolute(file, base: baseDirectory), format: format), created: created)
        case .wrapped(let value):
            return DatabaseKey(id: id, source: .wrapped(value), created: created)
        }
    }

    /// `text` as a YAML double-quoted scalar (JSON's string syntax, which YAML accepts).
    static func quoted(_ text: String) -> String {
        // Printable ASCII without `"` and backslashes is written as it is (what the encoder gives, at a
        // fraction of its cost: a rewrap quotes two values per data key).
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) { return "\"" + text + "\"" }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        let data = (try? encoder.encode(text)) ?? Data("\"\"".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}

/// Edits the text of a Keys file.
enum KeysFileEditing {
    /// Why the text could not be edited.
    enum Problem: Error, Equatable, CustomStringConvertible {
        /// The file has no database entry whose `path` is `database`.
        case noEntry(database: String, configured: [String])
        /// The entry already has a key with this id.
        case idTaken(id: String, database: String)
        /// The file is not laid out in a way this edit supports (flow style, an alias, …).
        case unsupportedLayout(String)
        /// The edited text did not load back as the same entries plus the new key.
        case notReproduced(String)

        package var description: String {
            switch self {
            case let .noEntry(database, configured):
                return "no database entry has path \(database) (entries: \(configured.isEmpty ? "none" : configured.joined(separator: ", "))); give the path or pattern exactly as the Keys file writes it"
            case let .idTaken(id, database):
                return "database \(database) already has a key \"\(id)\"; choose another id"
            case .unsupportedLayout(let detail):
                return "the Keys file is written in a way this command does not edit (\(detail)); add the key by hand"
            case .notReproduced(let detail):
                return "the edited Keys file would not read back as before plus the new key (\(detail)); nothing was changed"
            }
        }
    }

    /// `text` with `key` appended as the last key of the database entry whose `path` is written
    /// as `database`.
    ///
    /// The new lines go right after the last line of that entry's last key (before any comment
    /// or blank line that follows it), indented like that key.
    /// - Throws: ``Problem``, or the ``KeyConfigurationError`` of a text that does not load.
    static func appending(_ key: KeysFileKeyLines, toDatabase database: String, in text: String, path: String, baseDirectory: String) throws -> String {
        let before = try KeysFile(yaml: text, path: path, baseDirectory: baseDirectory)
        guard let entryIndex = before.entries.firstIndex(where: { $0.configuredPath == database }) else {
            throw Problem.noEntry(database: database, configured: before.entries.map(\.configuredPath))
        }
        guard !before.entries[entryIndex].keys.contains(where: { $0.id == key.id }) else {
            throw Problem.idTaken(id: key.id, database: database)
        }
        let keysNode = try keysSequence(ofEntry: entryIndex, in: text)
        guard keysNode.style != .flow, let last = keysNode.last, let sequenceMark = keysNode.mark, let itemMark = last.mark else {
            throw Problem.unsupportedLayout("the key list of \(database) is not a block list (`- id: …` lines)")
        }
        let newline = text.contains("\r\n") ? "\r\n" : "\n"
        var lines = text.components(separatedBy: newline)
        let dashIndent = sequenceMark.column - 1
        // The fields of `- id: x` start right after the dash; a key written as `-` alone on its
        // line has its fields on the next lines, two columns in.
        let fieldIndent = itemMark.column - 1 > dashIndent ? itemMark.column - 1 : dashIndent + 2
        let insertAfter = lastLine(ofItemStartingAt: itemMark.line - 1, dashIndent: dashIndent, in: lines)
        var added: [String] = []
        for (index, field) in key.fields.enumerated() {
            let lead = index == 0
                ? String(repeating: " ", count: dashIndent) + "-" + String(repeating: " ", count: fieldIndent - dashIndent - 1)
                : String(repeating: " ", count: fieldIndent)
            added.append("\(lead)\(field.name): \(field.value)")
        }
        lines.insert(contentsOf: added, at: insertAfter + 1)
        let edited = lines.joined(separator: newline)
        try checkReproduced(before: before, after: edited, entryIndex: entryIndex, key: key, path: path, baseDirectory: baseDirectory)
        return edited
    }

    /// The `keys:` sequence node of database entry `index`.
    static func keysSequence(ofEntry index: Int, in text: String) throws -> Node.Sequence {
        guard let root = try Yams.compose(yaml: text, .basic), let databases = value(of: "databases", in: root)?.sequence,
              databases.style != .flow  // libyaml reports a block list's style as `any`
        else { throw Problem.unsupportedLayout("databases: is not a block list") }
        guard index < databases.count, let keys = value(of: "keys", in: databases[index])?.sequence else {
            throw Problem.unsupportedLayout("an entry's keys: is not a list")
        }
        return keys
    }

    /// The value of the field `name` of the mapping `node`, compared as plain text.
    static func value(of name: String, in node: Node) -> Node? {
        node.mapping?.first { $0.key.string == name }?.value
    }

    /// The index of the last line that belongs to the list item starting on line `first` (0-based):
    /// the following lines indented deeper than its dash belong to it; blank and comment lines
    /// belong only when more of the item follows them.
    static func lastLine(ofItemStartingAt first: Int, dashIndent: Int, in lines: [String]) -> Int {
        var last = first
        var index = first + 1
        while index < lines.count {
            let line = lines[index]
            let content = line.drop { $0 == " " }
            if content.isEmpty || content.hasPrefix("#") {
                index += 1
                continue
            }
            guard line.count - content.count > dashIndent else { break }
            last = index
            index += 1
        }
        return last
    }

    /// Throws unless `after` loads as `before` with `key` appended to entry `entryIndex`.
    private static func checkReproduced(before: KeysFile, after: String, entryIndex: Int, key: KeysFileKeyLines, path: String, baseDirectory: String) throws {
        let edited: KeysFile
        do {
            edited = try KeysFile(yaml: after, path: path, baseDirectory: baseDirectory)
        } catch {
            throw Problem.notReproduced("it does not load: \(error)")
        }
        guard edited.entries.count == before.entries.count else { throw Problem.notReproduced("the number of entries changed") }
        for (index, (old, new)) in zip(before.entries, edited.entries).enumerated() {
            guard old.configuredPath == new.configuredPath else { throw Problem.notReproduced("entry \(index) changed its path") }
            var expected = old.keys.map(\.description)
            if index == entryIndex {
                expected.append(key.databaseKey(baseDirectory: baseDirectory).description)
            }
            guard new.keys.map(\.description) == expected else { throw Problem.notReproduced("the keys of entry \(index) are not the old ones plus the new key") }
        }
    }
}
