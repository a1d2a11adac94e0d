import Hummingbird

/// Every limit on what a client sends (the README's "Limits" table lists them), and the checks
/// that answer 400 with a short message when a value is outside its limit.
///
/// The database would store or search any value; the limits keep a request's cost bounded (a
/// search term becomes a `LIKE` pattern, which SQLite refuses past 50,000 bytes with an error no
/// client should see) and refuse what cannot mean what the client asked: `+1` or `01` for an id,
/// or a NUL, where SQLite's `LIKE` would end the pattern (`q=%00` matched every note).
enum InputLimits {
    /// A note's `text`, in UTF-8 bytes.
    static let text = 1...65_536
    /// A note's `author`, and the `author` filter of a list or a search, in UTF-8 bytes.
    static let author = 1...256
    /// A search's `q`, in UTF-8 bytes.
    static let searchTerm = 1...1_024
    /// A list's or a search's `limit`: a value outside is clamped into it.
    static let pageSize = 1...500

    /// `value`, when its UTF-8 length is in `bytes` and it has no NUL.
    /// - Throws: `HTTPError` 400 naming `name` and the limit.
    static func text(_ value: String, named name: String, bytes: ClosedRange<Int>) throws -> String {
        guard bytes.contains(value.utf8.count), !value.utf8.contains(0) else {
            throw HTTPError(.badRequest, message: "\(name) must be \(bytes.lowerBound) to \(bytes.upperBound) bytes of text without NUL")
        }
        return value
    }

    /// The optional `author` filter of a query.
    static func author(in query: Parameters) throws -> String? {
        try query.get("author").map { try text($0, named: "author", bytes: author) }
    }

    /// An id: decimal digits only, no sign, no leading zero, at most `Int64.max`.
    /// - Throws: `HTTPError` 400 naming `name`.
    static func id(_ value: some StringProtocol, named name: String) throws -> Int64 {
        guard value.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
              value == "0" || !value.hasPrefix("0"), let id = Int64(value) else {
            throw HTTPError(.badRequest, message: "\(name) must be a decimal number from 0 to \(Int64.max), without sign or leading zero")
        }
        return id
    }

    /// The `limit` of a query, clamped into ``pageSize``; `fallback` when it is missing or not a number.
    static func pageSize(in query: Parameters, fallback: Int) -> Int {
        min(max(query.get("limit", as: Int.self) ?? fallback, pageSize.lowerBound), pageSize.upperBound)
    }
}
