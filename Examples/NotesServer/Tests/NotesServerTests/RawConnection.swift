import Foundation

/// A TCP connection to the server on 127.0.0.1 that sends bytes exactly as given — malformed,
/// part of a request, a half-close — and reads whatever comes back. Blocking, with a receive
/// timeout, so that a server that never answers fails the test instead of hanging it.
final class RawConnection {
    private let socket: Int32

    init(port: Int, receiveTimeout: Duration = .seconds(20)) throws {
        socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw SocketError(call: "socket") }
        var timeout = timeval(tv_sec: Int(receiveTimeout.components.seconds), tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { close(socket); throw SocketError(call: "connect") }
    }

    deinit { close(socket) }

    /// Sends `bytes` whole (MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE).
    func send(_ bytes: some Collection<UInt8>) throws {
        var bytes = Array(bytes)[...]
        while !bytes.isEmpty {
            let sent = bytes.withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw SocketError(call: "send") }
            bytes = bytes.dropFirst(sent)
        }
    }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// Ends the sending side (the server reads end of file); replies can still come.
    func halfClose() { shutdown(socket, Int32(SHUT_WR)) }

    /// Every byte until the server closes (or the receive timeout).
    func readToEnd() -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return received }
            received += buffer[..<count]
        }
    }

    /// Whether the server closed the connection (end of file or reset) within `bound`; anything it
    /// sends before is read and dropped.
    func closedByServer(within bound: Duration) -> Bool {
        let deadline = ContinuousClock.now + bound
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while ContinuousClock.now < deadline {
            var poll = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let left = Int32(max(1, (deadline - ContinuousClock.now) / .milliseconds(1)))
            guard Glibc.poll(&poll, 1, min(left, 100)) > 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count == 0 || (count < 0 && errno != EAGAIN) { return true }
        }
        return false
    }

    /// A socket call failed.
    struct SocketError: Error, CustomStringConvertible {
        let call: String
        let code = errno
        var description: String { "\(call): \(String(cString: strerror(code)))" }
    }
}
