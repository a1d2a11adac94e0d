import CipherFormats
import Yams

// How the Keys file's YAML is read field by field (KeysFileDocument.swift reads its shape with
// them): where a value is, for messages, and a mapping's fields checked against those it may have.

/// Where a value is in the document, for messages: `databases[0].keys[1].cipher`, or
/// `the top level`.
struct DocumentPath {
    private enum Part { case field(String), item(Int) }
    /// Written out only for a message (a fleet's file has a path for each of its entries).
    private var parts: [Part] = []
    /// A last list index not yet in `parts`: the path of each of a list's items is then the
    /// list's path and a number, with no array made for it.
    private var lastItem: Int?

    /// The path of field `name` of the mapping here.
    func field(_ name: String) -> DocumentPath {
        var path = self
        if let index = path.lastItem {
            path.parts.append(.item(index))
            path.lastItem = nil
        }
        path.parts.append(.field(name))
        return path
    }

    /// The path of item `index` of the list here.
    func item(_ index: Int) -> DocumentPath {
        var path = self
        if let previous = path.lastItem { path.parts.append(.item(previous)) }
        path.lastItem = index
        return path
    }

    /// The path as messages show it.
    var location: String {
        guard !parts.isEmpty || lastItem != nil else { return "the top level" }
        var text = ""
        for part in parts + (lastItem.map { [Part.item($0)] } ?? []) {
            switch part {
            case .field(let name): text += text.isEmpty ? name : ".\(name)"
            case .item(let index): text += "[\(index)]"
            }
        }
        return text
    }
}

/// The fields of one mapping, after checking that the node is a mapping of known fields only.
struct FieldReader {
    let path: DocumentPath
    /// The fields' names and values in file order (a handful: looked up by a scan, cheaper than a
    /// dictionary made for each of a fleet's entries).
    private let names: [String]
    private let values: [Node]

    /// Reads `node` at `path` as a mapping whose fields are all in `allowed`.
    /// - Throws: ``KeyConfigurationError/keysFileInvalid(path:location:problem:)`` when it is not a
    ///   mapping, ``KeyConfigurationError/unknownField(path:location:field:allowed:)`` for the first
    ///   unknown field (not shown unless it looks like a field name). The Keys file's path is
    ///   filled in by the caller.
    init(_ node: Node, at path: DocumentPath, allowed: [String]) throws(KeyConfigurationError) {
        guard case .mapping(let mapping) = node else {
            throw .keysFileInvalid(path: "", location: path.location, problem: "expected a mapping with the documented fields")
        }
        var names: [String] = []
        var values: [Node] = []
        names.reserveCapacity(mapping.count)
        values.reserveCapacity(mapping.count)
        // By index: iterating a Node.Mapping copies its pairs into a new array first.
        for index in mapping.indices {
            let (key, value) = mapping[index]
            let name = key.scalar?.string ?? ""
            guard key.scalar != nil, allowed.contains(name) else {
                throw .unknownField(path: "", location: path.location, field: KeyConfigurationError.shownFieldName(name, allowed: allowed), allowed: allowed)
            }
            // The composer refuses a field written twice, so each name is here once.
            names.append(name)
            values.append(value)
        }
        self.path = path
        self.names = names
        self.values = values
    }

    private func invalid(_ name: String, _ problem: String) -> KeyConfigurationError {
        .keysFileInvalid(path: "", location: path.field(name).location, problem: problem)
    }

    /// The field's node, or `nil` when it is absent or null (`~`, `null`, or nothing).
    func node(_ name: String) -> Node? {
        guard let index = names.firstIndex(of: name) else { return nil }
        let node = values[index]
        if case .scalar(let scalar) = node, scalar.style == .plain, scalar.string.utf8.count <= 4, ["", "~", "null", "Null", "NULL"].contains(scalar.string) { return nil }
        return node
    }

    /// A scalar field as text.
    func string(_ name: String) throws(KeyConfigurationError) -> String? {
        guard let node = node(name) else { return nil }
        guard case .scalar(let scalar) = node else { throw invalid(name, "expected text") }
        return scalar.string
    }

    /// A field that must be there, as text.
    func requiredString(_ name: String) throws(KeyConfigurationError) -> String {
        guard let value = try string(name) else { throw missing(name) }
        return value
    }

    /// A whole number (decimal, or `0x`/`0o` prefixed).
    func int(_ name: String) throws(KeyConfigurationError) -> Int? {
        guard let text = try string(name) else { return nil }
        let digits = text.replacingOccurrences(of: "_", with: "")
        let value: Int? = digits.hasPrefix("0x") ? Int(digits.dropFirst(2), radix: 16)
            : digits.hasPrefix("0o") ? Int(digits.dropFirst(2), radix: 8) : Int(digits)
        guard let value else { throw invalid(name, "expected a whole number") }
        return value
    }

    /// `true` or `false` (also YAML 1.1's yes/no and on/off, as the YAML library reads them).
    func bool(_ name: String) throws(KeyConfigurationError) -> Bool? {
        guard let text = try string(name) else { return nil }
        switch text {
        case "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON": return true
        case "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF": return false
        default: throw invalid(name, "expected true or false")
        }
    }

    /// A list field's items, or `nil` when it is absent or null.
    func list(_ name: String) throws(KeyConfigurationError) -> Node.Sequence? {
        guard let node = node(name) else { return nil }
        guard case .sequence(let sequence) = node else { throw invalid(name, "expected a list") }
        return sequence
    }

    /// A list field that must be there.
    func requiredList(_ name: String) throws(KeyConfigurationError) -> Node.Sequence {
        guard let items = try list(name) else { throw missing(name) }
        return items
    }

    private func missing(_ name: String) -> KeyConfigurationError {
        !names.contains(name)
            ? .keysFileInvalid(path: "", location: path.location, problem: "the field \"\(name)\" is missing")
            : invalid(name, "expected a value, found nothing")
    }

    /// A `format:` field.
    func format(_ name: String) throws(KeyConfigurationError) -> KeyFormat? {
        guard let text = try string(name) else { return nil }
        guard let format = KeyFormat(rawValue: text) else {
            throw invalid(name, "format must be one of: \(KeyFormat.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return format
    }
}
