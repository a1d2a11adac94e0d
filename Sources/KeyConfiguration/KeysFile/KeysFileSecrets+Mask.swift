import Foundation

// The masked copy of a Keys file that the YAML parser reads first (see KeysFileSecrets): the same
// structure, lines and columns, and no key material.

extension KeysFileSecrets {
    /// YAML's punctuation, white space and line breaks: kept as they are in the masked copy.
    static let kept: Set<UInt8> = Set(" \t\r\n-?:,[]{}#&*!|>'\"%@`\\.".utf8)
    /// ``kept`` as a table by byte value: one look-up per byte of the file, not a hash.
    private static let keptTable: [Bool] = (0...255).map { kept.contains(UInt8($0)) }

    /// `true` when `byte` is in ``kept``.
    @inline(__always)
    static func isKept(_ byte: UInt8) -> Bool { keptTable.withUnsafeBufferPointer { $0[Int(byte)] } }
    private static let letters: [UInt8] = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)

    /// `true` for the bytes an anchor or alias name may hold besides `-`: ASCII letters, digits, `_`.
    private static func isAnchorByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_")
    }

    /// `bytes` with every other byte replaced by a letter. Each run of such bytes becomes a run of
    /// letters of the same length that numbers the distinct runs in order of appearance (found by
    /// a hash of their bytes, never kept as text): equal runs mask alike, so anchors still meet
    /// their aliases, and different ones differently, so duplicate-field checks still work. A
    /// byte after a backslash becomes `a`, an escape every double-quoted scalar accepts.
    /// Directive lines (`%YAML`) are kept.
    static func mask(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        maskWithFieldNames(bytes).masked
    }

    /// ``mask(_:)``, and the masked forms of the secret field names (`passphrase`, `hex`) as they
    /// appear in this copy, so that a plain mapping key can be told to be one of them without
    /// reading the file's bytes again (one comparison per key, however large the file).
    static func maskWithFieldNames(_ bytes: UnsafeRawBufferPointer) -> (masked: [UInt8], fieldNames: Set<String>) {
        var masked = [UInt8](repeating: 0, count: bytes.count)
        var numbers: [Int: Int] = [:]
        var index = 0
        var lineStart = true
        var directiveLine = false
        while index < bytes.count {
            let byte = bytes[index]
            if lineStart { directiveLine = byte == UInt8(ascii: "%") }
            if directiveLine || isKept(byte) {
                masked[index] = byte
                lineStart = byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r")
                index += 1
                continue
            }
            lineStart = false
            var end = index
            while end < bytes.count, !isKept(bytes[end]) { end += 1 }
            var hasher = Hasher()
            hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: bytes[index..<end]))
            let key = hasher.finalize()
            let number = numbers[key] ?? numbers.count
            numbers[key] = number
            var digits = number
            for position in index..<end {
                if position > 0 && bytes[position - 1] == UInt8(ascii: "\\") {
                    masked[position] = UInt8(ascii: "a")
                } else {
                    masked[position] = letters[digits % letters.count]
                    digits /= letters.count
                }
            }
            // An anchor or alias name (after `&` or `*`) may hold only ASCII letters, digits and
            // `_`: its first other byte masks as `~`, which libyaml refuses there as in the file.
            if index > 0, bytes[index - 1] == UInt8(ascii: "&") || bytes[index - 1] == UInt8(ascii: "*"),
               let invalid = (index..<end).first(where: { !isAnchorByte(bytes[$0]) }) {
                masked[invalid] = UInt8(ascii: "~")
            }
            index = end
        }
        var fieldNames = Set<String>()
        for field in secretFields {
            var hasher = Hasher()
            Array(field.utf8).withUnsafeBytes { hasher.combine(bytes: $0) }
            guard var digits = numbers[hasher.finalize()] else { continue }
            var letterRun: [UInt8] = []
            for _ in 0..<field.utf8.count {
                letterRun.append(letters[digits % letters.count])
                digits /= letters.count
            }
            fieldNames.insert(String(decoding: letterRun, as: UTF8.self))
        }
        return (masked, fieldNames)
    }
}
