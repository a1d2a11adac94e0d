import CipherFormats
import Foundation
import Yams

/// The one parse of a Keys file: the node tree composed from a masked copy of the file, and the
/// ``Finder`` that reads each scalar's own text, or a `passphrase:` or `hex:` value's bytes, from
/// the file where the document reads it. The parser (libyaml, Yams) never sees key material, so no
/// parse error can quote it, and no `String` ever holds it.
///
/// The YAML text is parsed once: a masked copy of the file, in which every byte that is not YAML
/// punctuation or white space is replaced by a letter (so it has the same structure, lines,
/// columns, anchors and aliases, and no key material), is composed into nodes. The document
/// (``KeysFileDocument``) is read from those nodes in one walk: each value of a `passphrase` or
/// `hex` field is located by its node's line, column and style, and its bytes are copied from the
/// file into a ``KeyText`` (``Finder/secret(_:field:inFlow:)``); every other scalar the document
/// reads gets its own text back from the file's bytes (``Finder/text(of:)``). Values written on
/// one line (plain, single-quoted or double-quoted) are read byte-exactly; block scalars (`|`,
/// `>`) and values spread over several lines are refused, as are YAML tags (`!!binary`, `!str`),
/// which the format does not define.
///
/// An anchor (`&name`) lets one node stand in several places, so a value read as text in one
/// place could be a secret value in another. A file with an anchor is therefore walked for its
/// secret values first (``Finder/findSecrets(in:)``); a scalar found there is never read as text.
/// A file without one is walked once.
struct KeysFileSecrets {
    /// The nodes composed from the masked copy (`nil` for an empty document): the file's
    /// structure, marks and styles, with masked text.
    let root: Node?
    /// Reads the file's text and secret values for the nodes of ``root``. Valid only while the
    /// bytes it was made from are.
    let finder: Finder

    /// The placeholder text of secret value `index` (in file order), for a scalar that an alias
    /// also puts where the document reads text: the secret's bytes never become that text.
    static func placeholder(_ index: Int) -> String { "\u{1}key-text-\(index)" }

    /// The fields whose values are key material.
    static let secretFields: Set<String> = ["passphrase", "hex"]

    /// Why the file cannot be read; `location` is a line and column, or `the file`.
    struct Failure: Error {
        let location: String
        let problem: String
    }

    /// Parses `bytes`, the whole Keys file, which must stay valid while ``finder`` is used.
    init(bytes file: UnsafeRawBufferPointer) throws(Failure) {
        // A byte order mark is not part of the YAML text.
        let start = file.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        let bytes = UnsafeRawBufferPointer(rebasing: file[start...])
        guard Self.isValidUTF8(bytes) else { throw Failure(location: "the file", problem: "it is not UTF-8 text") }
        let (masked, maskedFieldNames) = Self.maskWithFieldNames(bytes)
        let maskedRoot: Node?
        do {
            // The one parse of the file. The basic resolver: every scalar is text (the format's
            // fields say what each is; the masked copy's tags mean nothing).
            maskedRoot = try Yams.compose(yaml: String(decoding: masked, as: UTF8.self), .basic)
        } catch let error as YamlError {
            throw Self.failure(of: error)
        } catch {
            throw Failure(location: "the file", problem: "not valid YAML")
        }
        finder = Finder(file: bytes, masked: masked, maskedSecretFieldNames: maskedFieldNames)
        // `&` is kept by the masking: without one in the text, no node stands in two places.
        let anchored = masked.withUnsafeBytes { bytes in
            bytes.baseAddress.map { memchr($0, Int32(UInt8(ascii: "&")), bytes.count) != nil } ?? false
        }
        if let maskedRoot, anchored { try finder.findSecrets(in: maskedRoot) }
        root = maskedRoot
    }

    private static func isValidUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
        // ASCII eight bytes at a time; the decoder takes over from the first word that is not.
        var ascii = 0
        while ascii + 8 <= bytes.count, bytes.loadUnaligned(fromByteOffset: ascii, as: UInt64.self) & 0x8080_8080_8080_8080 == 0 { ascii += 8 }
        var iterator = UnsafeRawBufferPointer(rebasing: bytes[ascii...]).makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }

    private static func failure(of error: YamlError) -> Failure {
        switch error {
        case let .duplicatedKeysInMapping(_, context):
            return Failure(location: "line \(context.mark.line), column \(context.mark.column)", problem: "a field appears twice; keep one")
        default:
            return Failure(location: KeysFile.location(of: error), problem: KeysFile.problem(of: error))
        }
    }
}

/// Reads what the document needs from the file, for the nodes composed from its masked copy: a
/// secret value's bytes (``secret(_:field:inFlow:)``), any other scalar's text
/// (KeysFileSecrets+Unmask.swift), a node's tag, style and place. A class: the document's readers
/// share it, and it keeps the secret values read so far. It holds the file's bytes by pointer, so
/// it lives only while they do (inside the parse).
final class Finder {
    let file: UnsafeRawBufferPointer
    let masked: [UInt8]
    /// The byte offset at which each line starts (libyaml's line breaks: LF, CRLF, CR).
    let lineStarts: [Int]
    /// The secret values read, by the offset where each starts in the file (an alias brings the
    /// same node back: its value is read once).
    private(set) var secrets: [Int: KeyText] = [:]
    /// `true` once ``findSecrets(in:)`` has found every secret value of the file: then a scalar
    /// that starts where one does is never read as text.
    private(set) var secretsFound = false

    /// The masked forms of `passphrase` and `hex` (see ``KeysFileSecrets/maskWithFieldNames(_:)``).
    let maskedSecretFieldNames: Set<String>

    init(file: UnsafeRawBufferPointer, masked: [UInt8], maskedSecretFieldNames: Set<String>) {
        self.file = file
        self.masked = masked
        self.maskedSecretFieldNames = maskedSecretFieldNames
        lineStarts = KeysFileEditing.LineStarts(masked).starts
    }

    typealias Failure = KeysFileSecrets.Failure

    /// `true` when at least one secret value was read from the file.
    var holdsMaterial: Bool { !secrets.isEmpty }

    /// The value of a `passphrase:` or `hex:` field (`field` names it in messages), read
    /// byte-exactly from the file into a zeroed buffer; never a `String`.
    /// - Throws: ``KeysFileSecrets/Failure`` when the value is not written on one line, plain or
    ///   in quotes, or holds an escape YAML does not define.
    func secret(_ scalar: Node.Scalar, field: String, inFlow: Bool) throws(Failure) -> KeyText {
        if let start = tokenStart(scalar.mark), let value = secrets[start] { return value }
        let (range, bytes) = try read(scalar, field: field, inFlow: inFlow)
        let value = KeyText(bytes: bytes)
        secrets[range.lowerBound] = value
        return value
    }

    /// Walks the whole tree for the values of every `passphrase` and `hex` field, wherever they
    /// are, and reads them; refuses YAML tags on the way. For a file with anchors, before the
    /// document is read (see ``KeysFileSecrets``).
    func findSecrets(in root: Node) throws(Failure) {
        try visit(root, inFlow: false)
        secretsFound = true
    }

    /// The number of the secret value starting at `start` in file order, when ``findSecrets(in:)``
    /// found one there.
    func secretNumber(startingAt start: Int) -> Int? {
        guard secretsFound, secrets[start] != nil else { return nil }
        return secrets.keys.filter { $0 < start }.count
    }

    private func visit(_ node: Node, inFlow: Bool) throws(Failure) {
        try refuseTag(at: node.mark)
        switch node {
        case .scalar, .alias:
            return
        case .sequence(let sequence):
            let flow = inFlow || opensFlow(sequence.mark)
            for element in sequence { try visit(element, inFlow: flow) }
        case .mapping(let mapping):
            let flow = inFlow || opensFlow(mapping.mark)
            // By index: iterating a Node.Mapping copies its pairs into a new array first.
            for index in mapping.indices {
                let (key, value) = mapping[index]
                try visit(key, inFlow: flow)
                // A plain key is a secret field only if it masked like one; a quoted key is read.
                if case .scalar(let keyScalar) = key, case .scalar(let valueScalar) = value, !isNull(valueScalar),
                   keyScalar.style != .plain || maskedSecretFieldNames.contains(keyScalar.string),
                   let name = try? fieldText(of: keyScalar, inFlow: flow), KeysFileSecrets.secretFields.contains(name) {
                    try refuseTag(at: value.mark)
                    _ = try secret(valueScalar, field: name, inFlow: flow)
                } else {
                    try visit(value, inFlow: flow)
                }
            }
        }
    }

    func place(_ mark: Mark?) -> String {
        mark.map { "line \($0.line), column \($0.column)" } ?? "the file"
    }

    private func offset(of mark: Mark?) -> Int? {
        guard let mark, mark.line >= 1, mark.line <= lineStarts.count else { return nil }
        let offset = lineStarts[mark.line - 1] + mark.column - 1
        return offset <= masked.count ? offset : nil
    }

    /// The offset where the scalar's own text starts: after an anchor (`&name`) if it has one.
    func tokenStart(_ mark: Mark?) -> Int? {
        guard var index = offset(of: mark) else { return nil }
        if index < masked.count, masked[index] == UInt8(ascii: "&") {
            while index < masked.count, !isBlank(masked[index]) { index += 1 }
            while index < masked.count, isBlank(masked[index]) { index += 1 }
        }
        return index
    }

    /// `true` when the collection at `mark` is written in flow style (`[…]`, `{…}`). Read from the
    /// text: Yams reports the style of a collection's end event, not of its start.
    func opensFlow(_ mark: Mark?) -> Bool {
        guard let start = tokenStart(mark), start < masked.count else { return false }
        return masked[start] == UInt8(ascii: "[") || masked[start] == UInt8(ascii: "{")
    }

    /// Refuses a YAML tag on the node at `mark`.
    func refuseTag(at mark: Mark?) throws(Failure) {
        if let start = tokenStart(mark), start < masked.count, masked[start] == UInt8(ascii: "!") {
            throw Failure(location: place(mark), problem: "YAML tags (such as !!binary or !!str) are not part of the Keys file format; remove the tag and write the value as text")
        }
    }

    /// `true` for a plain null (empty, `~`, `null`): no value, which the decoder reports as a
    /// missing source.
    func isNull(_ scalar: Node.Scalar) -> Bool {
        guard scalar.style == .plain else { return false }
        let length = scalar.string.utf8.count
        if length == 0 { return true }
        guard length <= 4, let start = tokenStart(scalar.mark), start + length <= file.count else { return false }
        // Compared as bytes: the value may be a key, which must not become a String.
        let bytes = file[start..<(start + length)]
        return ["~", "null", "Null", "NULL"].contains { bytes.elementsEqual($0.utf8) }
    }

    private func isBlank(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
    private func isBreak(_ byte: UInt8) -> Bool { byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") }

    /// A field name's text (not secret), for plain and quoted names on one line.
    private func fieldText(of scalar: Node.Scalar, inFlow: Bool) throws(Failure) -> String {
        let (_, bytes) = try read(scalar, field: "a field name", inFlow: inFlow)
        return bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    /// The byte range of a scalar in the file and its value, read byte-exactly.
    private func read(_ scalar: Node.Scalar, field: String, inFlow: Bool) throws(Failure) -> (Range<Int>, SecretBytes) {
        let location = place(scalar.mark)
        let oneLine = "write the \(field) value on one line, plain or in quotes (or put the key in a key file)"
        guard let start = tokenStart(scalar.mark), start < masked.count else {
            throw Failure(location: location, problem: "the \(field) value could not be located; \(oneLine)")
        }
        switch scalar.style {
        case .singleQuoted:
            return try readSingleQuoted(from: start, location: location, oneLine: oneLine, masked: scalar.string)
        case .doubleQuoted:
            return try readDoubleQuoted(from: start, location: location, oneLine: oneLine)
        case .plain:
            return try readPlain(from: start, inFlow: inFlow, location: location, oneLine: oneLine, masked: scalar.string)
        default:
            throw Failure(location: location, problem: "block scalars (| and >) are not supported for \(field); \(oneLine)")
        }
    }

    private func readPlain(from start: Int, inFlow: Bool, location: String, oneLine: String, masked value: String) throws(Failure) -> (Range<Int>, SecretBytes) {
        var end = start
        while end < masked.count {
            let byte = masked[end]
            if isBreak(byte) { break }
            if byte == UInt8(ascii: "#"), end > start, isBlank(masked[end - 1]) { break }
            if byte == UInt8(ascii: ":") {
                let following = end + 1 < masked.count ? masked[end + 1] : UInt8(ascii: "\n")
                if isBlank(following) || isBreak(following) || (inFlow && ",[]{}".utf8.contains(following)) { break }
            }
            if inFlow, ",[]{}".utf8.contains(byte) { break }
            end += 1
        }
        while end > start, isBlank(masked[end - 1]) { end -= 1 }
        // The composed (masked) value must be exactly these bytes: otherwise the scalar goes on
        // over more lines.
        guard Array(value.utf8) == Array(masked[start..<end]) else {
            throw Failure(location: location, problem: "values spread over several lines are not supported here; \(oneLine)")
        }
        return (start..<end, SecretBytes(copying: UnsafeRawBufferPointer(rebasing: file[start..<end])))
    }

    private func readSingleQuoted(from start: Int, location: String, oneLine: String, masked value: String) throws(Failure) -> (Range<Int>, SecretBytes) {
        let quote = UInt8(ascii: "'")
        var index = start + 1
        var content: [Int] = []  // offsets of the value's bytes
        while true {
            guard index < masked.count, !isBreak(masked[index]) else {
                throw Failure(location: location, problem: "quoted values spread over several lines are not supported here; \(oneLine)")
            }
            if masked[index] == quote {
                if index + 1 < masked.count, masked[index + 1] == quote {
                    content.append(index)
                    index += 2
                    continue
                }
                break
            }
            content.append(index)
            index += 1
        }
        guard Array(value.utf8) == content.map({ masked[$0] }) else {
            throw Failure(location: location, problem: "the quoted value could not be read byte-exactly; \(oneLine)")
        }
        let secret = SecretBytes(count: content.count) { buffer in
            for (position, offset) in content.enumerated() { buffer[position] = file[offset] }
        }
        return (start..<(index + 1), secret)
    }

    private func readDoubleQuoted(from start: Int, location: String, oneLine: String) throws(Failure) -> (Range<Int>, SecretBytes) {
        // Decoded into a buffer twice as large as the rest of the line (the value ends on it, and
        // no escape grows more than half: `\L` and `\P` give 3 bytes), then copied.
        var lineEnd = start + 1
        while lineEnd < file.count, !isBreak(file[lineEnd]) { lineEnd += 1 }
        var end = start + 1
        var count = 0
        var problem: String?
        let scratch = SecretBytes(count: 2 * (lineEnd - start)) { buffer in
            func append(_ byte: UInt8) { buffer[count] = byte; count += 1 }
            func appendScalar(_ value: UInt32) -> Bool {
                guard let scalar = Unicode.Scalar(value) else { return false }
                for byte in UTF8.encode(scalar)! { append(byte) }
                return true
            }
            while true {
                guard end < file.count, !isBreak(file[end]) else {
                    problem = "quoted values spread over several lines are not supported here; \(oneLine)"
                    return
                }
                let byte = file[end]
                if byte == UInt8(ascii: "\"") { break }
                guard byte == UInt8(ascii: "\\") else {
                    append(byte)
                    end += 1
                    continue
                }
                guard end + 1 < file.count else { problem = "unfinished escape; \(oneLine)"; return }
                let escape = file[end + 1]
                end += 2
                let simple: [UInt8: UInt8] = [
                    UInt8(ascii: "0"): 0, UInt8(ascii: "a"): 7, UInt8(ascii: "b"): 8, UInt8(ascii: "t"): 9, 9: 9,
                    UInt8(ascii: "n"): 10, UInt8(ascii: "v"): 11, UInt8(ascii: "f"): 12, UInt8(ascii: "r"): 13,
                    UInt8(ascii: "e"): 27, UInt8(ascii: " "): 32, UInt8(ascii: "\""): 34, UInt8(ascii: "/"): 47, UInt8(ascii: "\\"): 92,
                ]
                let named: [UInt8: UInt32] = [UInt8(ascii: "N"): 0x85, UInt8(ascii: "_"): 0xA0, UInt8(ascii: "L"): 0x2028, UInt8(ascii: "P"): 0x2029]
                let digits: [UInt8: Int] = [UInt8(ascii: "x"): 2, UInt8(ascii: "u"): 4, UInt8(ascii: "U"): 8]
                if let value = simple[escape] {
                    append(value)
                } else if let value = named[escape] {
                    _ = appendScalar(value)
                } else if let length = digits[escape] {
                    var value: UInt32 = 0
                    for _ in 0..<length {
                        guard end < file.count, let digit = Hex.value(of: file[end]) else {
                            problem = "an escape \\\(Character(Unicode.Scalar(escape))) needs \(length) hex digits; \(oneLine)"
                            return
                        }
                        value = value << 4 | UInt32(digit)
                        end += 1
                    }
                    guard appendScalar(value) else { problem = "an escape names no Unicode character; \(oneLine)"; return }
                } else {
                    problem = "an escape (a backslash) is not one YAML defines, or it ends the line; \(oneLine)"
                    return
                }
            }
        }
        if let problem { throw Failure(location: location, problem: problem) }
        let secret = scratch.withUnsafeBytes { SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
        return (start..<(end + 1), secret)
    }
}
