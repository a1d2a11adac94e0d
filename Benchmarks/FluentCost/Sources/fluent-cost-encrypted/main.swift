import EncryptedSQLite
import FluentEncryptedSQLiteDriver
import FluentKit
import FluentWorkload
import Foundation
import Logging
import NIOPosix

// This repository's driver over SQLCipher, a raw 256-bit key made at run time (no key derivation
// in the timed phases), 2 pooled readers (WAL).
// In a function: top-level code picks the EventLoopFuture overloads over the async ones.
func main() async throws {
    let arguments = try CostArguments()
    var generator = SystemRandomNumberGenerator()
    let hex = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max, using: &generator)) }.joined()
    let keysPath = arguments.folder + "/Keys"
    for run in 0..<arguments.runs {
        let path = arguments.folder + "/encrypted-\(run).sqlite"
        let text = "databases:\n  - path: \(path)\n    keys:\n      - id: bench\n        hex: \(hex)\n"
        guard FileManager.default.createFile(atPath: keysPath, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw WorkloadError(description: "cannot write \(keysPath)")
        }
        let databases = Databases(threadPool: NIOThreadPool.singleton, on: MultiThreadedEventLoopGroup.singleton)
        databases.use(.encryptedSQLite(path: path, keysFile: keysPath, options: OpenOptions(createIfMissing: true, concurrentReaders: 2)), as: .sqlite)
        let database = databases.database(.sqlite, logger: Logger(label: "fluent-cost"), on: MultiThreadedEventLoopGroup.singleton.any())!
        try await CreateSchema().prepare(on: database)
        let times = try await Workload().run(on: database)
        print(Workload.line(driver: "encrypted-sqlite", run: run, times: times))
        await databases.shutdownAsync()
        for suffix in ["", "-wal", "-shm", "-lock"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }
    try? FileManager.default.removeItem(atPath: keysPath)
}

try await main()
