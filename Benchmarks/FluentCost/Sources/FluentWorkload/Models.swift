import FluentKit
import Foundation

/// A project with many todos: the relation the workload eager-loads.
public final class Project: Model, @unchecked Sendable {
    public static let schema = "projects"
    @ID(key: .id) public var id: UUID?
    @Field(key: "name") public var name: String
    @Children(for: \.$project) public var todos: [Todo]

    public init() {}
    public init(name: String) { self.name = name }
}

/// A todo of a project, as a Vapor app's model: client-made UUID, a few typed fields, a parent.
public final class Todo: Model, @unchecked Sendable {
    public static let schema = "todos"
    @ID(key: .id) public var id: UUID?
    @Field(key: "title") public var title: String
    @Field(key: "priority") public var priority: Int
    @Field(key: "done") public var done: Bool
    @Field(key: "created") public var created: Date
    @Parent(key: "project_id") public var project: Project

    public init() {}
    public init(title: String, priority: Int, done: Bool, created: Date, project: UUID) {
        self.title = title
        self.priority = priority
        self.done = done
        self.created = created
        self.$project.id = project
    }
}

/// The schema: both tables, the foreign key, and an index on the filtered columns.
public struct CreateSchema: AsyncMigration {
    public init() {}
    public func prepare(on database: any Database) async throws {
        try await database.schema(Project.schema).id().field("name", .string, .required).create()
        try await database.schema(Todo.schema).id()
            .field("title", .string, .required).field("priority", .int, .required).field("done", .bool, .required)
            .field("created", .datetime, .required)
            .field("project_id", .uuid, .required, .references(Project.schema, .id))
            .create()
    }
    public func revert(on database: any Database) async throws {
        try await database.schema(Todo.schema).delete()
        try await database.schema(Project.schema).delete()
    }
}
