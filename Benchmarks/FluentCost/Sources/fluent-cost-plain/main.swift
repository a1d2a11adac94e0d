import FluentKit
import FluentSQLiteDriver
import FluentWorkload
import Foundation
import Logging
import NIOPosix

// fluent-sqlite-driver over sqlite-nio's own SQLite (no encryption), WAL as on the other side.
// In a function: top-level code picks the EventLoopFuture overloads over the async ones.
func main() async throws {
    let arguments = try CostArguments()
    for run in 0..<arguments.runs {
        let path = arguments.folder + "/plain-\(run).sqlite"
        let databases = Databases(threadPool: NIOThreadPool.singleton, on: MultiThreadedEventLoopGroup.singleton)
        databases.use(.sqlite(.file(path)), as: .sqlite)
        let database = databases.database(.sqlite, logger: Logger(label: "fluent-cost"), on: MultiThreadedEventLoopGroup.singleton.any())!
        _ = try await (database as! any SQLDatabase).raw("PRAGMA journal_mode = WAL").all()
        try await CreateSchema().prepare(on: database)
        let times = try await Workload().run(on: database)
        print(Workload.line(driver: "fluent-sqlite-driver", run: run, times: times))
        await databases.shutdownAsync()
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }
}

try await main()
