import Foundation
import Testing

/// What a careless or hostile client gets (issue 36): 4xx with a short JSON message for its own
/// mistakes, 500 with a request id for the server's, and never SQL or a file path. Each test runs
/// its own server over a new encrypted database.
@Suite("notes-server answers a client's mistakes with 4xx and a JSON message", .serialized)
struct ClientErrorTests {
    /// A search term past SQLite's LIKE pattern limit (50,000 bytes, once `%` is escaped):
    /// a 500 with "LIKE or GLOB pattern too complex" and the SQL, before, once a row was compared.
    enum LongTerm: String, CaseIterable {
        case bytes49999 = "49,999 bytes"
        case percents25000 = "25,000 %"

        var query: String {
            switch self {
            case .bytes49999: String(repeating: "a", count: 49_999)
            case .percents25000: String(repeating: "%25", count: 25_000)
            }
        }
    }

    @Test("a search term past 1,024 bytes is a 400", arguments: LongTerm.allCases)
    func longSearchTerm(_ term: LongTerm) throws {
        let server = try ServerProcess()
        _ = try server.add(text: "hello")
        let reply = try server.request("GET", "/search?q=\(term.query)")
        expectClientError(reply, 400, server)
        #expect(try server.request("GET", "/search?q=\(String(repeating: "a", count: 1_024))").status == 200)
    }

    /// A body the server cannot read: a 500 with the parser's or the stream's error, before.
    enum UnreadableBody: String, CaseIterable {
        case badChunkSize = "Transfer-Encoding: chunked, then the chunk size zz"
        case cutShort = "8 bytes of a Content-Length of 100, then a half-close"

        var request: [UInt8] {
            let head = "POST /notes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            switch self {
            case .badChunkSize: return Array((head + "Transfer-Encoding: chunked\r\n\r\nzz\r\n").utf8)
            case .cutShort: return Array((head + "Content-Length: 100\r\n\r\n{\"text\":").utf8)
            }
        }
    }

    @Test("a body that cannot be read is a 400", arguments: UnreadableBody.allCases)
    func unreadableBody(_ body: UnreadableBody) throws {
        let server = try ServerProcess()
        expectClientError(try server.exchange(body.request), 400, server)
        #expect(try server.request("GET", "/notes").status == 200)
    }

    @Test("author is 1 to 256 bytes (1.5 MB was stored before)")
    func authorLimit() throws {
        let server = try ServerProcess()
        expectClientError(try server.request("POST", "/notes", body: #"{"text": "t", "author": "\#(String(repeating: "a", count: 1_500_000))"}"#), 400, server)
        expectClientError(try server.request("POST", "/notes", body: #"{"text": "t", "author": "\#(String(repeating: "a", count: 257))"}"#), 400, server)
        expectClientError(try server.request("POST", "/notes", body: #"{"text": "t", "author": ""}"#), 400, server)
        #expect(try server.request("POST", "/notes", body: #"{"text": "t", "author": "\#(String(repeating: "a", count: 256))"}"#).status == 201)
    }

    @Test("a NUL in a search term is a 400 (q=%00 matched every note before)")
    func nulInSearchTerm() throws {
        let server = try ServerProcess()
        _ = try server.add(text: "hello")
        expectClientError(try server.request("GET", "/search?q=%00"), 400, server)
        expectClientError(try server.request("GET", "/search?q=he%00zz"), 400, server)
        #expect(try server.request("GET", "/search?q=hell").body.contains("hello"))
    }

    @Test("an id is decimal digits only (/notes/+1 answered note 1 before)", arguments: ["+1", "01", "1x", "%2B1", "-1", "99999999999999999999"])
    func strictID(_ id: String) throws {
        let server = try ServerProcess()
        #expect(try server.add(text: "one") == 1)
        expectClientError(try server.request("GET", "/notes/\(id)"), 400, server)
        expectClientError(try server.request("GET", "/notes?before=\(id)"), 400, server)
        #expect(try server.request("GET", "/notes/1").status == 200)
    }

    @Test("another method on a known path is a 405 with Allow; an unknown path a 404, both with a message (404 empty before)")
    func methods() throws {
        let server = try ServerProcess()
        for (method, path, allow) in [("DELETE", "/notes/1", "GET"), ("PUT", "/notes", "GET, POST"), ("PROPFIND", "/health", "GET"), ("POST", "/search?q=a", "GET")] {
            let reply = try server.request(method, path)
            expectClientError(reply, 405, server)
            #expect(reply.headers["allow"] == allow, "\(method) \(path)")
        }
        expectClientError(try server.request("GET", "/nothing/here"), 404, server)
        expectClientError(try server.request("GET", "/notes/12345"), 404, server)
    }

    @Test("/health names the key, not the database's path")
    func healthHasNoPath() throws {
        let server = try ServerProcess()
        let reply = try server.request("GET", "/health?fresh=1")
        #expect(reply.status == 200, "\(reply)")
        #expect(reply.body.contains(#""currentKeyID":"k0""#))
        expectNothingInternal(reply, server)
    }

    @Test("an error the server cannot explain is a 500 naming the request id, which the log has with the error; no SQL",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlcipher"), "needs the sqlcipher shell"))
    func serverError() throws {
        let server = try ServerProcess()
        _ = try server.add(text: "one")
        // The table goes behind the server's back, by the sqlcipher shell with the key: the next read fails in SQLite.
        let shell = Process()
        shell.executableURL = URL(filePath: "/usr/bin/sqlcipher")
        shell.arguments = ["-batch", "-bail", server.folder.appending(path: "notes.sqlite").path]
        let input = Pipe()
        (shell.standardInput, shell.standardOutput) = (input, FileHandle.nullDevice)
        try shell.run()
        input.fileHandleForWriting.write(Data("PRAGMA key = \"x'\(try server.key)'\";\nDROP TABLE notes;\n".utf8))
        try input.fileHandleForWriting.close()
        shell.waitUntilExit()
        try #require(shell.terminationStatus == 0)

        let reply = try server.request("GET", "/notes/1")
        #expect(reply.status == 500, "\(reply)")
        let id = try #require(reply.errorMessage?.firstMatch(of: /request ([0-9a-f]+)/)?.1, "\(reply)")
        expectNothingInternal(reply, server)
        #expect(reply.body.count < 200)
        #expect(server.log.split(separator: "\n").contains { $0.contains("request failed") && $0.contains(id) }, "\(server.log)")
    }
}

/// `reply` has `status` and a JSON error message, and shows nothing of the server's inside.
func expectClientError(_ reply: Reply, _ status: Int, _ server: ServerProcess, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(reply.status == status, "\(reply)", sourceLocation: sourceLocation)
    #expect(reply.headers["content-type"]?.hasPrefix("application/json") == true, "\(reply)", sourceLocation: sourceLocation)
    #expect(reply.errorMessage.map { !$0.isEmpty && $0.utf8.count <= 200 } == true, "\(reply)", sourceLocation: sourceLocation)
    expectNothingInternal(reply, server, sourceLocation: sourceLocation)
}

/// No SQL, no path of the server's files, in `reply`.
func expectNothingInternal(_ reply: Reply, _ server: ServerProcess, sourceLocation: SourceLocation = #_sourceLocation) {
    for marker in ["SELECT ", "INSERT ", " LIKE ", "FROM notes", ".sqlite", server.folder.path, "SQLite"] {
        #expect(!reply.body.contains(marker), "\(marker) in \(reply)", sourceLocation: sourceLocation)
    }
}
