import Foundation
import Testing

/// Read and idle timeouts, and a graceful shutdown bounded whatever clients do (issue 36): SIGTERM
/// while a client had sent 8 of 100 body bytes left the server running until that client closed,
/// past a unit's `TimeoutStopSec=30`.
@Suite("notes-server times out slow clients and shuts down in bounded time", .serialized)
struct TimeoutTests {
    /// A request head announcing 100 body bytes, and the first 8 of them, in one write.
    static let partialRequest = Array("POST /notes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"text\":".utf8)

    @Test("a request that trickles in, a byte every 100 ms, is cut at the read timeout (1 s here)")
    func readTimeout() throws {
        let server = try ServerProcess(["--read-timeout", "1", "--idle-timeout", "30"])
        let connection = try RawConnection(port: server.port)
        let start = ContinuousClock.now
        try connection.send(Self.partialRequest)
        var closed = false
        // Each byte restarts the idle timer, never the read timeout; 91 of 100 bytes at most.
        for _ in 0..<80 where !closed {
            closed = connection.closedByServer(within: .milliseconds(100)) || (try? connection.send([0x20])) == nil
        }
        let elapsed = ContinuousClock.now - start
        #expect(closed, "the connection was still open after \(elapsed)")
        #expect(elapsed < .seconds(4), "closed after \(elapsed)")
        #expect(try server.request("GET", "/notes").status == 200)
    }

    /// The slow clients of the tests below.
    enum SlowClient: String {
        case silentFromStart = "a client that sends nothing"
        case silentInBody = "a client silent after 8 of 100 body bytes"
        case tricklingInBody = "a client sending a byte every 100 ms after 8 of 100 body bytes"
    }

    @Test("a connection that sends nothing for the idle timeout (1 s here) is closed", arguments: [SlowClient.silentFromStart, .silentInBody])
    func idleTimeout(_ client: SlowClient) throws {
        let server = try ServerProcess(["--idle-timeout", "1", "--read-timeout", "30"])
        let connection = try RawConnection(port: server.port)
        if client == .silentInBody { try connection.send(Self.partialRequest) }
        #expect(connection.closedByServer(within: .seconds(5)))
        #expect(try server.request("GET", "/notes").status == 200)
    }

    @Test("SIGTERM with a client part-way through a body: the server ends within 5 s, cleanly", arguments: [SlowClient.silentInBody, .tricklingInBody])
    func shutdownWithClientMidBody(_ client: SlowClient) throws {
        // Default timeouts (read 10 s, idle 30 s): the shutdown must not wait for them.
        let server = try ServerProcess()
        let port = server.port
        // The client runs on a thread of its own until the server closes its connection.
        let clientDone = DispatchSemaphore(value: 0)
        Thread {
            defer { clientDone.signal() }
            guard let connection = try? RawConnection(port: port), (try? connection.send(Self.partialRequest)) != nil else { return }
            for _ in 0..<91 {
                if connection.closedByServer(within: .milliseconds(100)) { return }
                if client == .tricklingInBody, (try? connection.send([0x20])) == nil { return }
            }
            _ = connection.closedByServer(within: .seconds(30))
        }.start()

        // Driven, not slept: SIGTERM only once the server is inside the request (its handler waits
        // for the body). Head and the 8 bytes went in one write, so the decoder had both already.
        try waitForActive("POST", server)
        let took = server.terminate(within: .seconds(20))
        print("notes-server shutdown with \(client.rawValue): \(took.map { "\($0)" } ?? "still running after 20 s")")
        let elapsed = try #require(took, "still running 20 s after SIGTERM")
        #expect(elapsed < .seconds(5))
        #expect(server.exitStatus == 0, "\(server.log)")
        #expect(server.log.contains("connectionsClosed=true"), "\(server.log)")
        #expect(clientDone.wait(timeout: .now() + 5) == .success, "the server did not close the client's connection")
    }

    @Test("SIGTERM while a client reads none of a 32 MB answer: ended within --shutdown-timeout (1 s here) and 5 s more")
    func shutdownWithClientNotReading() throws {
        let server = try ServerProcess(["--shutdown-timeout", "1"])
        let text = String(repeating: "x", count: 65_536)
        for _ in 0..<500 { _ = try server.add(text: text) }
        let connection = try RawConnection(port: server.port)
        try connection.send("GET /notes?limit=500 HTTP/1.1\r\nHost: x\r\n\r\n")
        // 2 active GETs: that one, and the /metrics request itself.
        try waitForActive("GET", count: 2, server)
        let took = server.terminate(within: .seconds(20))
        print("notes-server shutdown with a client reading none of its answer: \(took.map { "\($0), exit status \(server.exitStatus)" } ?? "still running after 20 s")")
        let elapsed = try #require(took, "still running 20 s after SIGTERM")
        #expect(elapsed < .seconds(8))
        withExtendedLifetime(connection) {}
    }

    @Test("SIGTERM while a write waits for a lock another process holds: cancelled after --shutdown-timeout (1 s here), ended within 5 s more",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlcipher"), "needs the sqlcipher shell"))
    func shutdownWithRequestStuckInTheDatabase() throws {
        let server = try ServerProcess(["--shutdown-timeout", "1", "--busy-timeout", "60"])
        // The sqlcipher shell takes the write lock and keeps it while its input stays open.
        let shell = Process()
        shell.executableURL = URL(filePath: "/usr/bin/sqlcipher")
        shell.arguments = ["-batch", server.folder.appending(path: "notes.sqlite").path]
        let (input, output) = (Pipe(), Pipe())
        (shell.standardInput, shell.standardOutput) = (input, output)
        try shell.run()
        defer { try? input.fileHandleForWriting.close(); shell.waitUntilExit() }
        input.fileHandleForWriting.write(Data("PRAGMA key = \"x'\(try server.key)'\";\nBEGIN EXCLUSIVE;\nSELECT 'locked';\n".utf8))
        // Driven: the POST goes once the shell says it holds the lock.
        var said = Data()
        while !String(decoding: said, as: UTF8.self).contains("locked") {
            let more = output.fileHandleForReading.availableData
            try #require(!more.isEmpty, "the sqlcipher shell ended: \(String(decoding: said, as: UTF8.self))")
            said += more
        }

        let port = server.port
        Thread { _ = try? ServerProcess.post(#"{"text": "waits", "author": "ann"}"#, port: port) }.start()
        try waitForActive("POST", server)
        let took = server.terminate(within: .seconds(20))
        print("notes-server shutdown with a write waiting 60 s for a lock: \(took.map { "\($0), exit status \(server.exitStatus)" } ?? "still running after 20 s")")
        let elapsed = try #require(took, "still running 20 s after SIGTERM")
        #expect(elapsed < .seconds(8))
        #expect(server.log.contains("the server is shutting down"), "\(server.log)")
    }

    /// Polls `/metrics` until Hummingbird's gauge of active requests shows `count` of `method` in progress.
    private func waitForActive(_ method: String, count: Double = 1, _ server: ServerProcess) throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let metrics = try server.request("GET", "/metrics").body
            if metrics.split(separator: "\n").contains(where: { $0.contains("active_requests") && $0.contains("\"\(method)\"") && Double($0.split(separator: " ").last ?? "") == count }) {
                return
            }
            usleep(10_000)
        }
        Issue.record("\(count) \(method) requests never were active on the server")
    }
}
