import EncryptedSQLite
import Hummingbird
import Logging

/// Turns every error a request meets into a short JSON answer (`{"error": {"message": …}}`) that
/// never shows SQL, a file path or a key id:
///
/// - the handlers' own `HTTPError`s (400, 404, 413) pass through;
/// - no route for the path: 404; a known path with another method: 405 with `Allow`;
/// - the database not open, or busy past its busy timeout, or the request cancelled because the
///   shutdown ran out of time: 503 (the client may retry);
/// - anything else is the server's: 500 naming the request's id, and the error is logged at
///   `error` with that id (`hb.request.id`) and the library's description, which may name SQL
///   and paths but never key material.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    /// The methods of each path, for 405.
    let routes: AllowedMethods

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound && error.body == nil {
            // The router's answer when no route matched: the handlers' 404s have a message.
            let allowed = routes.methods(for: request.uri.path)
            guard !allowed.isEmpty else { throw HTTPError(.notFound, message: "no such path") }
            let list = allowed.map(\.rawValue).joined(separator: ", ")
            throw HTTPError(.methodNotAllowed, headers: [.allow: list], message: "\(request.method.rawValue.prefix(32)) is not allowed here: \(list)")
        } catch let error as any HTTPResponseError {
            throw error
        } catch is DatabaseService.Unavailable {
            throw HTTPError(.serviceUnavailable, message: "the database is not open")
        } catch is CancellationError {
            // The graceful shutdown outlasted --shutdown-timeout and the group cancelled this request.
            context.logger.notice("request cancelled: the server is shutting down", metadata: ["method": "\(request.method)", "path": "\(request.uri.path)"])
            throw HTTPError(.serviceUnavailable, message: "the server is shutting down")
        } catch let error as SQLiteError where error.isBusy {
            context.logger.warning("database busy", metadata: ["error": "\(error)"])
            throw HTTPError(.serviceUnavailable, message: "the database is busy: try again")
        } catch {
            context.logger.error("request failed", metadata: ["method": "\(request.method)", "path": "\(request.uri.path)", "error": "\(error)"])
            throw HTTPError(.internalServerError, message: "internal error, request \(context.id)")
        }
    }
}
