import Fluent
import Vapor

/// The JSON API. Every input has a limit (README.md lists them); a client's mistake gets a 4xx
/// with a short message.
///
/// - `POST /projects` `{"name": …}` → 201, the project
/// - `GET /projects/{id}` → the project with its todos (eager-loaded `@Children`)
/// - `POST /projects/{id}/todos` `{"title": …}` → 201, the todo
/// - `GET /projects/{id}/todos?done=false&limit=20` → the project's newest todos
/// - `GET /todos/{id}` → the todo with its project (eager-loaded `@Parent`)
/// - `PATCH /todos/{id}` `{"done": true}` → the todo
/// - `GET /health` → 200 `ok` after a read of the database
struct TodoRoutes: RouteCollection {
    static let nameLimit = 100, titleLimit = 200, pageLimit = 100

    func boot(routes: any RoutesBuilder) throws {
        routes.post("projects", use: createProject)
        routes.get("projects", ":project", use: project)
        routes.post("projects", ":project", "todos", use: createTodo)
        routes.get("projects", ":project", "todos", use: todos)
        routes.get("todos", ":todo", use: todo)
        routes.patch("todos", ":todo", use: updateTodo)
        routes.get("health", use: health)
    }

    struct NewProject: Content { var name: String }
    struct NewTodo: Content { var title: String }
    struct TodoChange: Content { var done: Bool }

    struct ProjectView: Content {
        var id: Int
        var name: String
        var todos: [TodoView]?
    }

    struct TodoView: Content {
        var id: Int
        var projectID: Int
        var title: String
        var done: Bool
        var createdAt: Date?
        var project: ProjectView?
    }

    func createProject(request: Request) async throws -> Response {
        let name = try Self.text(request.content.decode(NewProject.self).name, "name", limit: Self.nameLimit)
        let project = Project(name: name)
        try await project.create(on: request.db)
        return try await Self.view(project).encodeResponse(status: .created, for: request)
    }

    func project(request: Request) async throws -> ProjectView {
        let id = try Self.id(request, "project")
        guard let project = try await Project.query(on: request.db).filter(\.$id == id).with(\.$todos).first() else {
            throw Abort(.notFound, reason: "no project \(id)")
        }
        return try Self.view(project, todos: project.todos)
    }

    func createTodo(request: Request) async throws -> Response {
        let projectID = try Self.id(request, "project")
        let title = try Self.text(request.content.decode(NewTodo.self).title, "title", limit: Self.titleLimit)
        guard try await Project.find(projectID, on: request.db) != nil else { throw Abort(.notFound, reason: "no project \(projectID)") }
        let todo = Todo(projectID: projectID, title: title)
        try await todo.create(on: request.db)
        return try await Self.view(todo).encodeResponse(status: .created, for: request)
    }

    func todos(request: Request) async throws -> [TodoView] {
        let projectID = try Self.id(request, "project")
        let limit = try request.query.get(Int?.self, at: "limit") ?? 20
        guard (1...Self.pageLimit).contains(limit) else { throw Abort(.badRequest, reason: "limit is 1 to \(Self.pageLimit)") }
        var query = Todo.query(on: request.db).filter(\.$project.$id == projectID)
        if let done = try request.query.get(Bool?.self, at: "done") { query = query.filter(\.$done == done) }
        return try await query.sort(\.$id, .descending).limit(limit).all().map { try Self.view($0) }
    }

    func todo(request: Request) async throws -> TodoView {
        let id = try Self.id(request, "todo")
        guard let todo = try await Todo.query(on: request.db).filter(\.$id == id).with(\.$project).first() else {
            throw Abort(.notFound, reason: "no todo \(id)")
        }
        return try Self.view(todo, project: todo.project)
    }

    func updateTodo(request: Request) async throws -> TodoView {
        let id = try Self.id(request, "todo")
        let change = try request.content.decode(TodoChange.self)
        guard let todo = try await Todo.find(id, on: request.db) else { throw Abort(.notFound, reason: "no todo \(id)") }
        todo.done = change.done
        try await todo.update(on: request.db)
        return try Self.view(todo)
    }

    func health(request: Request) async throws -> String {
        _ = try await Project.query(on: request.db).count()
        return "ok"
    }

    // MARK: Input and output

    /// A path's id: 1 to 18 ASCII digits (not `+1`, `01x` or a number too large for the column).
    static func id(_ request: Request, _ name: String) throws -> Int {
        guard let text = request.parameters.get(name), (1...18).contains(text.utf8.count),
              text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let id = Int(text), id > 0 else {
            throw Abort(.badRequest, reason: "the \(name) id is a whole number from 1")
        }
        return id
    }

    /// Text of 1 to `limit` characters, without NUL or other control characters.
    static func text(_ value: String, _ name: String, limit: Int) throws -> String {
        guard !value.isEmpty, value.count <= limit else { throw Abort(.badRequest, reason: "\(name) is 1 to \(limit) characters") }
        guard !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw Abort(.badRequest, reason: "\(name) has a control character")
        }
        return value
    }

    static func view(_ project: Project, todos: [Todo]? = nil) throws -> ProjectView {
        try ProjectView(id: project.requireID(), name: project.name, todos: todos?.map { try view($0) })
    }

    static func view(_ todo: Todo, project: Project? = nil) throws -> TodoView {
        try TodoView(id: todo.requireID(), projectID: todo.$project.id, title: todo.title, done: todo.done,
                     createdAt: todo.createdAt, project: project.map { try view($0) })
    }
}
