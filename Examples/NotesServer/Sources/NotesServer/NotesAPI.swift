import Foundation
import EncryptedSQLite
import Hummingbird
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
/// Every input has a limit (``InputLimits``), and every error is a short JSON answer
/// (``ErrorMiddleware``): 4xx for the client's mistakes, 503 while the database is not open or
/// busy, 500 with a request id for the server's own, never with SQL or a path.
enum NotesAPI {
    /// The methods each path answers: keep in step with the routes below.
    static let routes = AllowedMethods([
        "notes": [.get, .post], "notes/:id": [.get], "search": [.get], "health": [.get], "metrics": [.get],
    ])

    static func router(database: DatabaseService, health: HealthMonitor, registry: PrometheusCollectorRegistry) -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        router.add(middleware: MetricsMiddleware())
        router.add(middleware: ErrorMiddleware(routes: routes))

        router.post("notes") { request, context -> EditedResponse<Note> in
            let new: NewNote
            do {
                new = try await request.decode(as: NewNote.self, context: context)
            } catch let error as any HTTPResponseError {
                throw error  // 400 for JSON that is not a note, 413 past Hummingbird's maxUploadSize (2 MiB)
            } catch {
                // The body stream failed: a malformed chunk, or the connection ended before the body did.
                throw HTTPError(.badRequest, message: "the request body could not be read")
            }
            let note = NewNote(
                text: try InputLimits.text(new.text, named: "text", bytes: InputLimits.text),
                author: try InputLimits.text(new.author, named: "author", bytes: InputLimits.author))
            return EditedResponse(status: .created, response: try await NoteStore(database: database.database()).add(note))
        }
        router.get("notes/:id") { _, context -> Note in
            let id = try InputLimits.id(context.parameters.require("id"), named: "id")
            guard let note = try await NoteStore(database: database.database()).note(id: id) else {
                throw HTTPError(.notFound, message: "no note \(id)")
            }
            return note
        }
        router.get("notes") { request, _ -> NotePage in
            let query = request.uri.queryParameters
            let limit = InputLimits.pageSize(in: query, fallback: 50)
            let before = try query.get("before").map { try InputLimits.id($0, named: "before") }
            let notes = try await NoteStore(database: database.database()).list(author: InputLimits.author(in: query), before: before, limit: limit)
            return NotePage(notes: notes, next: notes.count == limit ? notes.last?.id : nil)
        }
        router.get("search") { request, _ -> NotePage in
            let query = request.uri.queryParameters
            let term = try InputLimits.text(query.get("q") ?? "", named: "q", bytes: InputLimits.searchTerm)
            let limit = InputLimits.pageSize(in: query, fallback: 20)
            let notes = try await NoteStore(database: database.database()).search(term, author: InputLimits.author(in: query), limit: limit)
            return NotePage(notes: notes, next: nil)
        }
        router.get("health") { request, context -> Response in
            let answer = await health.answer(for: try database.database(), fresh: request.uri.queryParameters.get("fresh") == "1", logger: context.logger)
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
