import Foundation
import EncryptedSQLite
import Hummingbird
import Logging
import Prometheus

/// The HTTP API, as a Hummingbird router over the ``DatabaseService``:
///
/// | request | answer |
/// |---|---|
/// | `POST /notes` `{"text": …, "author": …}` | 201 and the stored note with its id, once committed |
/// | `GET /notes/{id}` | the note, or 404 |
/// | `GET /notes?author=&before=&limit=` | ``NotePage``: newest first, `limit` at most 500 (default 50) |
/// | `GET /search?q=&author=&limit=` | notes whose text contains `q`, newest first |
/// | `GET /health` | ``HealthMonitor/Answer``: 200 while healthy, 503 when not |
/// | `GET /metrics` | every swift-metrics value, in Prometheus' text format |
///
/// Database errors become JSON errors: 503 while the database is not open or busy past its busy
/// timeout, 500 for anything else (logged at `error` with the library's description, which names
/// key ids only, never key material).
enum NotesAPI {
    static func router(database: DatabaseService, health: HealthMonitor, registry: PrometheusCollectorRegistry, logger: Logger) -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        router.add(middleware: MetricsMiddleware())
        router.add(middleware: DatabaseErrorMiddleware(logger: logger))

        router.post("notes") { request, context -> EditedResponse<Note> in
            let new = try await request.decode(as: NewNote.self, context: context)
            guard !new.text.isEmpty, new.text.utf8.count <= 64 * 1024 else {
                throw HTTPError(.badRequest, message: "text must be 1 to 65536 bytes")
            }
            let note = try await NoteStore(database: database.database()).add(new)
            return EditedResponse(status: .created, response: note)
        }
        router.get("notes/:id") { _, context -> Note in
            let id = try context.parameters.require("id", as: Int64.self)
            guard let note = try await NoteStore(database: database.database()).note(id: id) else {
                throw HTTPError(.notFound, message: "no note \(id)")
            }
            return note
        }
        router.get("notes") { request, _ -> NotePage in
            let query = request.uri.queryParameters
            let limit = min(max(query.get("limit", as: Int.self) ?? 50, 1), 500)
            let notes = try await NoteStore(database: database.database())
                .list(author: query.get("author"), before: query.get("before", as: Int64.self), limit: limit)
            return NotePage(notes: notes, next: notes.count == limit ? notes.last?.id : nil)
        }
        router.get("search") { request, _ -> NotePage in
            let query = request.uri.queryParameters
            guard let term = query.get("q"), !term.isEmpty else { throw HTTPError(.badRequest, message: "q is required") }
            let limit = min(max(query.get("limit", as: Int.self) ?? 20, 1), 500)
            let notes = try await NoteStore(database: database.database()).search(term, author: query.get("author"), limit: limit)
            return NotePage(notes: notes, next: nil)
        }
        router.get("health") { request, context -> Response in
            let answer = await health.answer(for: try database.database(), fresh: request.uri.queryParameters.get("fresh") == "1")
            var response = try JSONEncoder().encode(answer, from: request, context: context)
            response.status = answer.status == "unhealthy" ? .serviceUnavailable : .ok
            return response
        }
        router.get("metrics") { _, _ -> Response in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
        }
        return router
    }
}

/// Turns the database's errors into HTTP answers: 503 when it is not open or busy, 500 otherwise,
/// logged with the library's description.
struct DatabaseErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as any HTTPResponseError {
            throw error
        } catch let error as DatabaseService.Unavailable {
            throw HTTPError(.serviceUnavailable, message: error.description)
        } catch {
            logger.error("request failed", metadata: ["method": "\(request.method)", "path": "\(request.uri.path)", "error": "\(error)"])
            if let sqlite = error as? SQLiteError, sqlite.isBusy {
                throw HTTPError(.serviceUnavailable, message: "the database is busy: \(sqlite)")
            }
            throw HTTPError(.internalServerError, message: "\(error)")
        }
    }
}
