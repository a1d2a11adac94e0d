import FluentKit
import Foundation

/// The workload of issue 33, item 5, on one Fluent database: insert 10,000 todos in batches
/// (each batch one `INSERT` and one commit), fetch with a filter, eager-load a relation.
public struct Workload: Sendable {
    public var todos = 10_000
    public var batch = 100
    public var projects = 100
    public var fetches = 20
    public var eagerLoads = 5

    public init() {}

    /// The phases' names, in order, as the JSON and the table show them.
    public static let phases = ["insert", "fetch", "eager"]

    /// Runs the phases on `database` (its schema already made) and returns each one's time.
    public func run(on database: any Database) async throws -> [String: Duration] {
        let clock = ContinuousClock()
        let projectModels = (0..<projects).map { Project(name: "project \($0)") }
        try await projectModels.create(on: database)
        let projectIDs = try projectModels.map { try $0.requireID() }
        let start = Date(timeIntervalSince1970: 1_767_225_600)

        var times: [String: Duration] = [:]
        times["insert"] = try await clock.measure {
            for first in stride(from: 0, to: todos, by: batch) {
                let models = (first..<min(first + batch, todos)).map { index in
                    Todo(title: "todo \(index)", priority: index % 5, done: index % 3 == 0,
                         created: start.addingTimeInterval(Double(index)), project: projectIDs[index % projects])
                }
                try await models.create(on: database)
            }
        }
        var found = 0
        times["fetch"] = try await clock.measure {
            for round in 0..<fetches {
                found += try await Todo.query(on: database).filter(\.$priority == round % 5).filter(\.$done == false).all().count
            }
        }
        var loaded = 0
        times["eager"] = try await clock.measure {
            for _ in 0..<eagerLoads {
                loaded += try await Project.query(on: database).with(\.$todos).all().reduce(0) { $0 + $1.todos.count }
            }
        }
        // The work was done: every fetch saw its rows, every eager load every todo.
        let expected = (0..<fetches).reduce(0) { sum, round in sum + (0..<todos).filter { $0 % 5 == round % 5 && $0 % 3 != 0 }.count }
        guard found == expected, loaded == eagerLoads * todos else {
            throw WorkloadError(description: "fetched \(found), eager-loaded \(loaded) todos: the workload did not run as intended")
        }
        return times
    }

    /// The result line the script reads: `{"driver": …, "run": n, "insert": ms, …}`.
    public static func line(driver: String, run: Int, times: [String: Duration]) -> String {
        let fields = phases.map { "\"\($0)\": \(String(format: "%.3f", Double(times[$0]!.components.attoseconds) / 1e15 + Double(times[$0]!.components.seconds) * 1000))" }
        return "{\"driver\": \"\(driver)\", \"run\": \(run), " + fields.joined(separator: ", ") + "}"
    }
}

/// The workload did not do what it should (a driver returned too few rows).
public struct WorkloadError: Error, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
}

/// `--runs N` and `--folder PATH` from the command line (defaults 3 and a temporary folder).
public struct CostArguments: Sendable {
    public var runs = 3
    public var folder = FileManager.default.temporaryDirectory.appendingPathComponent("fluent-cost-\(UUID().uuidString)").path

    public init(_ arguments: [String] = CommandLine.arguments) throws {
        var rest = arguments.dropFirst()
        while let argument = rest.popFirst() {
            switch argument {
            case "--runs": runs = Int(rest.popFirst() ?? "") ?? 0
            case "--folder": folder = rest.popFirst() ?? ""
            default: throw WorkloadError(description: "usage: \(arguments.first ?? "fluent-cost") [--runs N] [--folder PATH]")
            }
        }
        guard runs > 0, !folder.isEmpty else { throw WorkloadError(description: "--runs needs a positive number, --folder a path") }
        // Absolute: a Keys file resolves a relative database path from its own folder.
        folder = URL(fileURLWithPath: folder).standardizedFileURL.path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }
}
