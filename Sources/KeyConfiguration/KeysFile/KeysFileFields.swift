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

/// The fields of one mapping of the masked node tree (KeysFileSecrets), after checking that the
/// node is a mapping of known fields only, with no YAML tag on it, its names or its values. Its
/// values are read through the ``Finder``: text from the file, secret values as bytes.
struct FieldReader {
    let path: DocumentPath
    /// Reads the file's text and secret values for the nodes.
    let finder: Finder
    /// `true` when the mapping is written in flow style (`{…}`) or inside a flow collection.
    let inFlow: Bool
    private let mapping: Node.Mapping
    private let allowed: [String]
    /// For each of `allowed`, by its index, four bits: the index of its pair in `mapping`, or
    /// 0xF when absent. Each field is there once and every field is allowed, so a mapping read
    /// has fewer pairs than that; no array is made for each of a fleet's mappings.
    private let slots: UInt64

    /// Reads `node` at `path` as a mapping whose fields are all in `allowed` (at most 15).
    /// - Parameter inFlow: `true` when the node is inside a flow collection.
    /// - Throws: ``KeyConfigurationError/keysFileInvalid(path:location:problem:)`` when it is not a
    ///   mapping, when it, a name or a value has a YAML tag, or a name cannot be read;
    ///   ``KeyConfigurationError/unknownField(path:location:field:allowed:)`` for the first
    ///   unknown field (not shown unless it looks like a field name). The Keys file's path is
    ///   filled in by the caller.
    init(_ node: Node, at path: DocumentPath, allowed: [String], finder: Finder, inFlow: Bool) throws(KeyConfigurationError) {
        assert(allowed.count < 16)
        try Self.reading { () throws(Finder.Failure) in try finder.refuseTag(at: node.mark) }
        guard case .mapping(let mapping) = node else {
            throw .keysFileInvalid(path: "", location: path.location, problem: "expected a mapping with the documented fields")
        }
        var slots = UInt64.max
        // The first field not allowed: its text, or "" for a name that is not a scalar.
        var unknown: String?
        var escapedName = false
        // By index: iterating a Node.Mapping copies its pairs into a new array first.
        for index in mapping.indices {
            let (key, value) = mapping[index]
            let name: (index: Int?, text: String?) = try Self.reading { () throws(Finder.Failure) in
                try finder.refuseTag(at: key.mark)
                try finder.refuseTag(at: value.mark)
                guard case .scalar(let scalar) = key else { return (nil, "") }
                // An escape masks as `\a`: names that differ in the masked copy may be equal text.
                if scalar.string.utf8.contains(7) { escapedName = true }
                return try finder.fieldName(of: scalar, among: allowed)
            }
            guard let field = name.index else {
                if unknown == nil { unknown = name.text ?? "" }
                continue
            }
            let shift = UInt64(4 * field)
            slots = slots & ~(0xF << shift) | UInt64(min(index, 0xE)) << shift
        }
        if escapedName {
            try Self.reading { () throws(Finder.Failure) in
                var names: [String] = []
                for index in mapping.indices {
                    if case .scalar(let scalar) = mapping[index].key { names.append(try finder.text(of: scalar)) }
                }
                try finder.refuseDuplicateKeys(names, mark: mapping.mark)
            }
        }
        if let unknown {
            throw .unknownField(path: "", location: path.location, field: KeyConfigurationError.shownFieldName(unknown, allowed: allowed), allowed: allowed)
        }
        self.path = path
        self.finder = finder
        self.inFlow = inFlow || finder.opensFlow(mapping.mark)
        self.mapping = mapping
        self.allowed = allowed
        self.slots = slots
    }

    /// `body`'s result, its failure as the error the load throws (the path is filled in later).
    private static func reading<Value>(_ body: () throws(Finder.Failure) -> Value) throws(KeyConfigurationError) -> Value {
        do { return try body() } catch { throw .keysFileInvalid(path: "", location: error.location, problem: error.problem) }
    }

    private func invalid(_ name: String, _ problem: String) -> KeyConfigurationError {
        .keysFileInvalid(path: "", location: path.field(name).location, problem: problem)
    }

    /// The index in the mapping of the pair of field `name`, when it is there.
    private func pair(_ name: String) -> Int? {
        guard let field = allowed.firstIndex(of: name) else { return nil }
        let pair = Int(truncatingIfNeeded: slots >> UInt64(4 * field) & 0xF)
        return pair == 0xF ? nil : pair
    }

    /// `true` when the mapping is written in flow style (`{…}`).
    var isFlowMapping: Bool { mapping.style == .flow }

    /// Where the name of field `name` is, when it is there.
    func nameMark(_ name: String) -> Mark? {
        pair(name).flatMap { mapping[$0].key.mark }
    }

    /// The field's node, or `nil` when it is absent or null (`~`, `null`, or nothing).
    func node(_ name: String) -> Node? {
        guard let pair = pair(name) else { return nil }
        let node = mapping[pair].value
        if case .scalar(let scalar) = node, finder.isNull(scalar) { return nil }
        return node
    }

    /// A scalar field as text.
    func string(_ name: String) throws(KeyConfigurationError) -> String? {
        guard let node = node(name) else { return nil }
        guard case .scalar(let scalar) = node else { throw invalid(name, "expected text") }
        return try text(of: scalar)
    }

    /// The text of `scalar`, a node under this mapping (see ``Finder/text(of:)``).
    func text(of scalar: Node.Scalar) throws(KeyConfigurationError) -> String {
        try Self.reading { () throws(Finder.Failure) in try finder.text(of: scalar) }
    }

    /// `true` when `node`, a value under this mapping, is a mapping with a field `name`; its value
    /// is not read.
    func mapping(_ node: Node, hasField name: String) throws(KeyConfigurationError) -> Bool {
        guard case .mapping(let mapping) = node else { return false }
        for index in mapping.indices {
            guard case .scalar(let key) = mapping[index].key else { continue }
            if try Self.reading({ () throws(Finder.Failure) in try finder.fieldName(of: key, among: [name]).index }) != nil { return true }
        }
        return false
    }

    /// A `passphrase:` or `hex:` field's value, read from the file's bytes (never a `String`).
    func secret(_ name: String) throws(KeyConfigurationError) -> KeyText? {
        guard let node = node(name) else { return nil }
        guard case .scalar(let scalar) = node else { throw invalid(name, "expected text") }
        return try Self.reading { () throws(Finder.Failure) in try finder.secret(scalar, field: name, inFlow: inFlow) }
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

    /// A list field's items, or `nil` when it is absent or null; `inFlow` is `true` when the
    /// items are inside a flow collection.
    func list(_ name: String) throws(KeyConfigurationError) -> (items: Node.Sequence, inFlow: Bool)? {
        guard let node = node(name) else { return nil }
        guard case .sequence(let sequence) = node else { throw invalid(name, "expected a list") }
        return (sequence, inFlow || finder.opensFlow(sequence.mark))
    }

    /// A list field that must be there.
    func requiredList(_ name: String) throws(KeyConfigurationError) -> (items: Node.Sequence, inFlow: Bool) {
        guard let list = try list(name) else { throw missing(name) }
        return list
    }

    private func missing(_ name: String) -> KeyConfigurationError {
        pair(name) == nil
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
