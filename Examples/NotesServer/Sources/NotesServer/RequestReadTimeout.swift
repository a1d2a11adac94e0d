import Logging
import NIOCore
import NIOHTTPTypes

/// A channel handler that closes a connection whose request has not arrived whole — head to the
/// end of its body — within `timeout`, or that is still sending a request when the server starts
/// its graceful shutdown.
///
/// Hummingbird's `idleTimeout` closes a connection that sends nothing for that long, but a client
/// that sends a byte now and then restarts it each time; and a graceful shutdown waits for every
/// request in progress, one whose body never ends included (SIGTERM while a client had sent 8 of
/// 100 body bytes left the server running until the client closed). No answer has been sent for
/// a request still being read, so closing its connection takes back nothing a client was told.
/// Installed per connection, after the HTTP decoder (`HTTP1Channel.Configuration.additionalChannelHandlers`).
final class RequestReadTimeout: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    private let timeout: TimeAmount
    private let logger: Logger
    /// Set from a request's head to its end: the request is being read.
    private var deadline: Scheduled<Void>?

    init(timeout: TimeAmount, logger: Logger) {
        self.timeout = timeout
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            deadline?.cancel()
            deadline = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [logger, timeout] in
                logger.notice("closing a connection: its request did not arrive within the read timeout", metadata: ["seconds": "\(timeout.nanoseconds / 1_000_000_000)"])
                context.close(promise: nil)
            }
        case .body:
            break
        case .end:
            stop()
        }
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent, deadline != nil {
            logger.notice("closing a connection at shutdown: its request was still being read")
            stop()
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        stop()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stop()
    }

    private func stop() {
        deadline?.cancel()
        deadline = nil
    }
}
