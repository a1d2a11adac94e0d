import Fluent
import Foundation

/// A project: a name, and its todos (Fluent `@Children`).
final class Project: Model, @unchecked Sendable {
    static let schema = "projects"

    @ID(custom: "id", generatedBy: .database) var id: Int?
    @Field(key: "name") var name: String
    @Children(for: \.$project) var todos: [Todo]

    init() {}

    init(name: String) {
        self.name = name
    }
}

/// A todo of a project (Fluent `@Parent`).
final class Todo: Model, @unchecked Sendable {
    static let schema = "todos"

    @ID(custom: "id", generatedBy: .database) var id: Int?
    @Parent(key: "project_id") var project: Project
    @Field(key: "title") var title: String
    @Field(key: "done") var done: Bool
    @Timestamp(key: "created_at", on: .create) var createdAt: Date?

    init() {}

    init(projectID: Int, title: String) {
        self.$project.id = projectID
        self.title = title
        self.done = false
    }
}

/// The projects table.
struct CreateProject: AsyncMigration {
    func prepare(on database: any Database) async throws {
        try await database.schema(Project.schema)
            .field("id", .int, .identifier(auto: true))
            .field("name", .string, .required)
            .unique(on: "name")
            .create()
    }

    func revert(on database: any Database) async throws {
        try await database.schema(Project.schema).delete()
    }
}

/// The todos table, each row referring to its project.
struct CreateTodo: AsyncMigration {
    func prepare(on database: any Database) async throws {
        try await database.schema(Todo.schema)
            .field("id", .int, .identifier(auto: true))
            .field("project_id", .int, .required, .references(Project.schema, "id", onDelete: .cascade))
            .field("title", .string, .required)
            .field("done", .bool, .required)
            .field("created_at", .datetime)
            .create()
    }

    func revert(on database: any Database) async throws {
        try await database.schema(Todo.schema).delete()
    }
}
