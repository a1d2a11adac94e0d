import EncryptedSQLite
import Fluent
import Vapor

/// Turns every error into a short JSON answer: the client's mistakes into 4xx, a busy database (a
/// rotation's swap, a long write) into 503, anything else into 500 with the request's id, logged
/// in full. An answer never shows SQL, a path or a key id: those stay in the log.
struct APIErrorMiddleware: AsyncMiddleware {
    struct Body: Content {
        var error: String
    }

    func respond(to request: Request, chainingTo next: any AsyncResponder) async throws -> Response {
        do {
            return try await next.respond(to: request)
        } catch {
            let (status, message) = Self.answer(for: error)
            if status == .internalServerError || status == .serviceUnavailable {
                request.logger.error("\(request.method) \(request.url.path): \(String(reflecting: error))")
            }
            let response = Response(status: status)
            try response.content.encode(Body(error: status == .internalServerError ? "\(message) (request \(request.id))" : message))
            return response
        }
    }

    static func answer(for error: any Error) -> (HTTPResponseStatus, String) {
        switch error {
        case let abort as any AbortError:
            return (abort.status, abort.status.code < 500 ? abort.reason : abort.status.reasonPhrase)
        case is DecodingError:
            return (.badRequest, "the body is not the JSON this route takes")
        case let error as EncryptedDatabaseError where error.category == .busy:
            return (.serviceUnavailable, "the database is busy (a key rotation or a long write): retry")
        case let error as SQLiteError where error.code.primary == .busy || error.code.primary == .locked:
            return (.serviceUnavailable, "the database is busy (a key rotation or a long write): retry")
        case let error as any DatabaseError where error.isConstraintFailure:
            return (.conflict, "that conflicts with what is stored (a name already used?)")
        default:
            return (.internalServerError, "internal error")
        }
    }
}
