import Foundation

/// An HTTP/1.1 answer as the server sent it: its status, headers (names lowercased) and body
/// (de-chunked when it came chunked).
struct Reply: CustomStringConvertible {
    var status: Int
    var headers: [String: String]
    var body: String

    /// Parses `bytes`; `nil` when they are not an HTTP answer (nothing came, or the connection ended early).
    init?(_ bytes: [UInt8]) {
        guard let end = bytes.firstRange(of: Array("\r\n\r\n".utf8)) else { return nil }
        let head = String(decoding: bytes[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        guard let statusLine = head.first, statusLine.hasPrefix("HTTP/1.1 "), let status = Int(statusLine.dropFirst(9).prefix(3)) else { return nil }
        self.status = status
        headers = Dictionary(head.dropFirst().compactMap { line in
            line.firstIndex(of: ":").map { (line[..<$0].lowercased(), line[line.index(after: $0)...].trimmingCharacters(in: .whitespaces)) }
        }, uniquingKeysWith: { first, _ in first })
        var body = Array(bytes[end.upperBound...])
        if headers["transfer-encoding"] == "chunked" { body = Self.dechunked(body) }
        self.body = String(decoding: body, as: UTF8.self)
    }

    var description: String { "\(status) \(headers) \(body.prefix(300))" }

    /// The `error.message` of a JSON error answer.
    var errorMessage: String? {
        guard let data = body.data(using: .utf8),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let error = object["error"] as? [String: Any] else { return nil }
        return error["message"] as? String
    }

    private static func dechunked(_ bytes: [UInt8]) -> [UInt8] {
        var rest = bytes[...]
        var body: [UInt8] = []
        while let line = rest.firstRange(of: Array("\r\n".utf8)),
              let size = Int(String(decoding: rest[..<line.lowerBound], as: UTF8.self), radix: 16), size > 0,
              rest.count >= line.upperBound - rest.startIndex + size {
            body += rest[line.upperBound..<(line.upperBound + size)]
            rest = rest[(line.upperBound + size)...].dropFirst(2)
        }
        return body
    }
}

/// One request per connection (`Connection: close`): the ways the tests talk to the server.
extension ServerProcess {
    /// Sends `method path` with `body` (JSON) and reads the answer.
    func request(_ method: String, _ path: String, body: String? = nil) throws -> Reply {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        if let body { head += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n" }
        return try exchange(Array((head + "\r\n" + (body ?? "")).utf8), halfClose: false)
    }

    /// Sends `bytes` as they are, half-closes (unless told not to), and reads the answer.
    func exchange(_ bytes: [UInt8], halfClose: Bool = true) throws -> Reply {
        try Self.exchange(bytes, halfClose: halfClose, port: port)
    }

    /// `POST /notes` with `body`, to the server on `port` (from another thread).
    static func post(_ body: String, port: Int) throws -> Reply {
        try exchange(Array("POST /notes HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8), halfClose: false, port: port)
    }

    private static func exchange(_ bytes: [UInt8], halfClose: Bool, port: Int) throws -> Reply {
        let connection = try RawConnection(port: port)
        try connection.send(bytes)
        if halfClose { connection.halfClose() }
        let received = connection.readToEnd()
        guard let reply = Reply(received) else { throw NoReply(received: received) }
        return reply
    }

    /// Stores a note; returns its id.
    func add(text: String, author: String = "ann") throws -> Int64 {
        let body = String(decoding: try JSONEncoder().encode(["text": text, "author": author]), as: UTF8.self)
        let reply = try request("POST", "/notes", body: body)
        guard reply.status == 201, let id = reply.body.firstMatch(of: /"id":(\d+)/).flatMap({ Int64($0.1) }) else { throw NoReply(received: Array(reply.description.utf8)) }
        return id
    }

    /// The server closed the connection without an HTTP answer, or answered unexpectedly.
    struct NoReply: Error, CustomStringConvertible {
        let received: [UInt8]
        var description: String { "no HTTP answer; received \(received.count) bytes: \(String(decoding: received.prefix(300), as: UTF8.self))" }
    }
}
