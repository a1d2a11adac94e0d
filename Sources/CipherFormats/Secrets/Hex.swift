/// Hexadecimal digits of key material, read and written byte by byte into the library's zeroed
/// buffers (never through `String`, whose storage the library cannot wipe).
package enum Hex {
    /// The lowercase digits, indexed by value.
    static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    /// The value of one ASCII hex digit (either case), or `nil` for any other byte.
    package static func value(of byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// Writes `byte` as two lowercase digits at `offset` of `output`.
    static func write(_ byte: UInt8, into output: UnsafeMutableRawBufferPointer, at offset: Int) {
        output[offset] = digits[Int(byte >> 4)]
        output[offset + 1] = digits[Int(byte & 0x0F)]
    }

    /// The bytes that `text` (an even number of digits, either case) writes, or `nil`. For values
    /// that are not secret, such as a salt.
    package static func bytes(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count / 2)
        for index in stride(from: 0, to: utf8.count, by: 2) {
            guard let high = value(of: utf8[index]), let low = value(of: utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    /// Lowercase digits for bytes that are not secret (a salt).
    package static func text(_ bytes: [UInt8]) -> String {
        String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] }, as: UTF8.self)
    }

    /// Two lowercase digits for a byte that is not secret (a setting such as the HMAC salt mask).
    static func byte(_ byte: UInt8) -> String {
        String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]], as: UTF8.self)
    }

    /// Decodes `output.count` bytes from the digit pairs of `text` starting at `offset`; `false`
    /// (with `output` partly written) when a byte there is not a hex digit.
    static func decode(_ text: UnsafeRawBufferPointer, from offset: Int, into output: UnsafeMutableRawBufferPointer) -> Bool {
        for index in 0..<output.count {
            guard let high = value(of: text[offset + 2 * index]), let low = value(of: text[offset + 2 * index + 1]) else { return false }
            output[index] = high << 4 | low
        }
        return true
    }
}
