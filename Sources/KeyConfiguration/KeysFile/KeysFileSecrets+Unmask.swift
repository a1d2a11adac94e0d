import Yams

// The one parse of a Keys file composes the masked copy (see KeysFileSecrets). Its nodes have the
// file's structure, lines and columns, and masked text; here a scalar the document reads gets the
// file's own text back (a secret value never does: it is read as bytes, by `Finder.secret`).
//
// Masking keeps YAML's punctuation, white space and line breaks and turns every other byte into a
// letter, one for one, so every choice libyaml makes about a scalar (where it ends, how its lines
// fold, what quotes and indentation drop) is the same for the masked copy as for the file. The
// letters of a composed scalar are therefore the masked forms of the file's other bytes from where
// the scalar starts, in order: each is read back from the file and checked against the masked copy.
// Escapes in double quotes are the exception (the masked `\a` stands for any escape): such a
// scalar, never a secret one, is composed on its own from the file's bytes.

extension Finder {
    /// The text in the file of `scalar`, a node composed from the masked copy. A scalar that
    /// starts where ``findSecrets(in:)`` found a secret value (an alias put it here) is that
    /// value's ``KeysFileSecrets/placeholder(_:)``, never its text.
    /// - Throws: ``KeysFileSecrets/Failure`` when the text cannot be read back (located by line
    ///   and column; the message never quotes the text).
    func text(of scalar: Node.Scalar) throws(KeysFileSecrets.Failure) -> String {
        let start = tokenStart(scalar.mark)
        // A plain empty scalar is a null, never a secret value.
        if secretsFound, let start, let index = secretNumber(startingAt: start), scalar.style != .plain || !scalar.string.isEmpty {
            return KeysFileSecrets.placeholder(index)
        }
        let text = scalar.string.utf8
        // Punctuation and white space only: the masked text is the file's.
        guard text.contains(where: { !KeysFileSecrets.isKept($0) }) else { return scalar.string }
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
        return unmaskedText
    }

    /// Which of `allowed` the mapping key `scalar` names, compared with the file's bytes where
    /// the key is a plain name on one line (no `String` made); otherwise, or when it names none of
    /// them, its ``text(of:)`` too, for the comparison and for messages.
    func fieldName(of scalar: Node.Scalar, among allowed: [String]) throws(KeysFileSecrets.Failure) -> (index: Int?, text: String?) {
        // After findSecrets(in:) a key may be a secret value an alias brought: read as text.
        if !secretsFound, scalar.style == .plain, let start = tokenStart(scalar.mark), let index = plainName(scalar, at: start, among: allowed) {
            return (index, nil)
        }
        let name = try text(of: scalar)
        return (allowed.firstIndex(of: name), name)
    }

    /// The index in `allowed` of the plain key `scalar` starting at `start` when its masked text
    /// is letters only and is the masked copy's at `start` (then its text is the file's bytes
    /// there, as ``text(of:)`` would read them), and those bytes are one of `allowed`.
    private func plainName(_ scalar: Node.Scalar, at start: Int, among allowed: [String]) -> Int? {
        var name = scalar.string
        return name.withUTF8 { letters -> Int? in
            guard start + letters.count <= masked.count else { return nil }
            for (offset, letter) in letters.enumerated() where KeysFileSecrets.isKept(letter) || masked[start + offset] != letter { return nil }
            let bytes = UnsafeRawBufferPointer(rebasing: file[start..<(start + letters.count)])
            return allowed.firstIndex { field in field.utf8.count == bytes.count && field.utf8.elementsEqual(bytes) }
        }
    }

    /// The duplicate-key check of the composer, again on the keys' own text (`names`, the text of
    /// a mapping's scalar keys), as Yams words it: keys with escapes that differ in the masked copy
    /// may be equal text.
    func refuseDuplicateKeys(_ names: [String], mark: Mark?) throws(KeysFileSecrets.Failure) {
        var seen: Set<String> = []
        var duplicates: [String] = []
        for name in names {
            if !seen.insert(name).inserted, !duplicates.contains(name) { duplicates.append(name) }
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
    private func composedAlone(_ scalar: Node.Scalar, bytes range: Range<Int>) throws(KeysFileSecrets.Failure) -> String {
        let composed: Node?
        do {
            composed = try Yams.compose(yaml: String(decoding: UnsafeRawBufferPointer(rebasing: file[range]), as: UTF8.self), .basic)
        } catch let error as YamlError {
            throw KeysFileSecrets.Failure(location: location(of: error, inScalarAt: range.lowerBound) ?? place(scalar.mark), problem: KeysFile.problem(of: error))
        } catch {
            throw unreadable(scalar)
        }
        guard case .scalar(let alone) = composed else { throw unreadable(scalar) }
        return alone.string
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
