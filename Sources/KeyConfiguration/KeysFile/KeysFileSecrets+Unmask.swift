import Yams

// The one parse of a Keys file composes the masked copy (see KeysFileSecrets). Its nodes have the
// file's structure, lines and columns, and masked text; here every scalar gets the file's own text
// back, except the secret values, which become placeholders.
//
// Masking keeps YAML's punctuation, white space and line breaks and turns every other byte into a
// letter, one for one, so every choice libyaml makes about a scalar (where it ends, how its lines
// fold, what quotes and indentation drop) is the same for the masked copy as for the file. The
// letters of a composed scalar are therefore the masked forms of the file's other bytes from where
// the scalar starts, in order: each is read back from the file and checked against the masked copy.
// Escapes in double quotes are the exception (the masked `\a` stands for any escape): such a
// scalar, never a secret one, is composed on its own from the file's bytes.

extension Finder {
    /// `node`, composed from the masked copy, with the file's text: a scalar that starts at an
    /// offset in `placeholders` becomes that secret value's ``KeysFileSecrets/placeholder(_:)``,
    /// every other scalar the text it was masked from. Collections keep their tags, styles and
    /// marks; aliases are left as they are (the composer resolves them to their nodes).
    /// - Throws: ``KeysFileSecrets/Failure`` when a scalar's text cannot be read back (located by
    ///   line and column; the message never quotes the text).
    func unmasked(_ node: Node, placeholders: [Int: Int]) throws(KeysFileSecrets.Failure) -> Node {
        switch node {
        case .scalar(let scalar):
            return .scalar(try unmasked(scalar, placeholders: placeholders))
        case .mapping(let mapping):
            var pairs: [(Node, Node)] = []
            pairs.reserveCapacity(mapping.count)
            var escapedKey = false
            for index in mapping.indices {
                let (key, value) = mapping[index]
                // An escape masks as `\a`: keys that differ in the masked copy may be equal text.
                if case .scalar(let scalar) = key, scalar.string.utf8.contains(7) { escapedKey = true }
                pairs.append((try unmasked(key, placeholders: placeholders), try unmasked(value, placeholders: placeholders)))
            }
            if escapedKey { try refuseDuplicateKeys(pairs, mark: mapping.mark) }
            return .mapping(Node.Mapping(pairs, mapping.tag, mapping.style, mapping.mark))
        case .sequence(let sequence):
            var nodes: [Node] = []
            nodes.reserveCapacity(sequence.count)
            for element in sequence { nodes.append(try unmasked(element, placeholders: placeholders)) }
            return .sequence(Node.Sequence(nodes, sequence.tag, sequence.style, sequence.mark))
        case .alias:
            return node
        }
    }

    private func unmasked(_ scalar: Node.Scalar, placeholders: [Int: Int]) throws(KeysFileSecrets.Failure) -> Node.Scalar {
        let start = tokenStart(scalar.mark)
        // A plain empty scalar is a null, never a secret value.
        if let start, let index = placeholders[start], scalar.style != .plain || !scalar.string.isEmpty {
            return Node.Scalar(KeysFileSecrets.placeholder(index), scalar.tag, .doubleQuoted, scalar.mark)
        }
        let text = scalar.string.utf8
        // Punctuation and white space only: the masked text is the file's.
        guard text.contains(where: { !KeysFileSecrets.isKept($0) }) else { return scalar }
        guard let start, start < masked.count else { throw unreadable(scalar) }
        var position: Int
        switch scalar.style {
        case .plain:
            position = start
        case .singleQuoted:
            position = start + 1
        case .doubleQuoted:
            if let end = escapedScalarEnd(from: start) { return try composedAlone(scalar, bytes: start..<end) }
            position = start + 1
        default:
            // A block scalar: its text starts on the line after the `|` or `>` header.
            position = start
            while position < masked.count, !isLineBreak(masked[position]) { position += 1 }
            if position + 1 < masked.count, masked[position] == UInt8(ascii: "\r"), masked[position + 1] == UInt8(ascii: "\n") { position += 1 }
            position += 1
        }
        // Written straight into the string's storage (no byte array in between); the masked copy
        // has the file's length, so each masked letter's file byte is at the same offset.
        var readable = true
        let unmaskedText = String(unsafeUninitializedCapacity: text.count) { buffer in
            var count = 0
            for byte in text {
                if KeysFileSecrets.isKept(byte) {
                    buffer[count] = byte
                    count += 1
                    continue
                }
                while position < masked.count, KeysFileSecrets.isKept(masked[position]) { position += 1 }
                guard position < masked.count, masked[position] == byte else { readable = false; return 0 }
                buffer[count] = file[position]
                count += 1
                position += 1
            }
            return count
        }
        guard readable else { throw unreadable(scalar) }
        return Node.Scalar(unmaskedText, scalar.tag, scalar.style, scalar.mark)
    }

    /// The duplicate-key check of the composer, again on the keys' own text, as Yams words it.
    private func refuseDuplicateKeys(_ pairs: [(Node, Node)], mark: Mark?) throws(KeysFileSecrets.Failure) {
        var seen: Set<String> = []
        var duplicates: [String] = []
        for (key, _) in pairs {
            guard case .scalar(let scalar) = key else { continue }
            if !seen.insert(scalar.string).inserted, !duplicates.contains(scalar.string) { duplicates.append(scalar.string) }
        }
        guard !duplicates.isEmpty else { return }
        let shown = duplicates.map { KeyConfigurationError.shownFieldName($0) }
        throw KeysFileSecrets.Failure(location: place(mark), problem: "a field appears twice (\(shown.joined(separator: ", "))); keep one")
    }

    /// The end (after the closing quote) of the double-quoted scalar whose opening quote is at
    /// `start`, when it holds an escape; `nil` when it holds none.
    private func escapedScalarEnd(from start: Int) -> Int? {
        var index = start + 1
        var escaped = false
        while index < masked.count {
            switch masked[index] {
            case UInt8(ascii: "\\"):
                escaped = true
                index += 2
            case UInt8(ascii: "\""):
                return escaped ? index + 1 : nil
            default:
                index += 1
            }
        }
        return nil
    }

    /// A double-quoted scalar with escapes, composed alone from its bytes in the file (a field
    /// that is not a secret one: secret values are read by ``read(_:field:inFlow:)``).
    private func composedAlone(_ scalar: Node.Scalar, bytes range: Range<Int>) throws(KeysFileSecrets.Failure) -> Node.Scalar {
        let composed: Node?
        do {
            composed = try Yams.compose(yaml: String(decoding: UnsafeRawBufferPointer(rebasing: file[range]), as: UTF8.self), .basic)
        } catch let error as YamlError {
            throw KeysFileSecrets.Failure(location: location(of: error, inScalarAt: range.lowerBound) ?? place(scalar.mark), problem: KeysFile.problem(of: error))
        } catch {
            throw unreadable(scalar)
        }
        guard case .scalar(let alone) = composed else { throw unreadable(scalar) }
        return Node.Scalar(alone.string, scalar.tag, scalar.style, scalar.mark)
    }

    /// Where in the file an error of a scalar composed alone is: its mark is counted from the
    /// scalar's first byte at `start`. The column is counted in characters, as libyaml counts it.
    private func location(of error: YamlError, inScalarAt start: Int) -> String? {
        let mark: Mark
        switch error {
        case let .scanner(_, _, found, _), let .parser(_, _, found, _), let .composer(_, _, found, _): mark = found
        default: return nil
        }
        var low = 0
        var high = lineStarts.count - 1
        while low < high {
            let middle = (low + high + 1) / 2
            if lineStarts[middle] <= start { low = middle } else { high = middle - 1 }
        }
        guard mark.line == 1 else { return "line \(low + mark.line), column \(mark.column)" }
        let before = file[lineStarts[low]..<start].filter { $0 & 0xC0 != 0x80 }.count
        return "line \(low + 1), column \(before + mark.column)"
    }

    private func unreadable(_ scalar: Node.Scalar) -> KeysFileSecrets.Failure {
        KeysFileSecrets.Failure(location: place(scalar.mark), problem: "the value could not be read; write it on one line, plain or in quotes")
    }

    private func isLineBreak(_ byte: UInt8) -> Bool { byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") }
}
