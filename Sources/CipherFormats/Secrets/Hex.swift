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
