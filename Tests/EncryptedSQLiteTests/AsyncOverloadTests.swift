import DurableFiles
import EncryptedSQLite
import Foundation
import Testing
import TestSupport

/// Which overload of `read`, `write` and `writeWithoutTransaction` async code runs.
///
/// The compile-time half is this file itself: the blocking overloads are `noasync`, so each
/// `try await database.…` below compiles without a diagnostic only because the compiler chose the
/// `async` overload (choosing the blocking one is diagnosed "unavailable from asynchronous
/// contexts"; the package builds without warnings). The runtime half: the closure does not see the
/// calling task's task-local value, so it ran on the database's own queue, not inline in the task.
/// Where Swift does not rank overloads by context (top-level code, closures without `await`), the
/// real compiler type-checks snippets against the built modules.
@Suite("Async code runs the async overloads of read, write and writeWithoutTransaction")
struct AsyncOverloadTests {
    enum Probe {
        @TaskLocal static var inCallingTask = false
    }

    @MainActor
    static func readOnMainActor(_ database: EncryptedDatabase) async throws -> Bool {
        try await database.read { _ in Probe.inCallingTask }
    }

    @Test("try await runs the async overloads in an async function, a multi-statement closure, async let, a Task, a task group and on the main actor")
    func asyncContexts() async throws {
        let scratch = try Scratch()
        let database = scratch.database
        try await Probe.$inCallingTask.withValue(true) {
            let read = try await database.read { _ in Probe.inCallingTask }
            let write = try await database.write { _ in Probe.inCallingTask }
            let bare = try await database.writeWithoutTransaction { _ in Probe.inCallingTask }
            let multiStatement = try await database.write { db in
                try db.execute("CREATE TABLE t(x)")
                try db.execute("INSERT INTO t(x) VALUES (1)")
                return Probe.inCallingTask
            }
            async let asyncLet = database.read { _ in Probe.inCallingTask }
            let inTask = try await Task { try await database.read { _ in Probe.inCallingTask } }.value
            let inGroup = try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask { try await database.write { _ in Probe.inCallingTask } }
                return try await group.next() ?? true
            }
            let onMainActor = try await Self.readOnMainActor(database)
            let fromAsyncLet = try await asyncLet
            // The probe itself: synchronous code in the task sees the value.
            #expect(Probe.inCallingTask)
            #expect([read, write, bare, multiStatement, fromAsyncLet, inTask, inGroup, onMainActor] == Array(repeating: false, count: 8))
        }
        let rows = try await database.read { db in try db.queryValue("SELECT count(*) FROM t", as: Int.self) }
        #expect(rows == 1)
        withExtendedLifetime(scratch) {}
    }

    @Test("with a reader pool, an async read runs in the calling task when a reader is free; when every reader is busy, the task waits suspended and the read runs on the database's queue once a reader is back")
    func pooledReads() async throws {
        let scratch = try Scratch(readers: 1)
        let database = scratch.database
        try await database.write { db in try db.execute("CREATE TABLE t(x); INSERT INTO t(x) VALUES (1)") }
        try await Probe.$inCallingTask.withValue(true) {
            #expect(try await database.read { _ in Probe.inCallingTask }, "a free reader: the read ran in the task")

            // The only reader, held by a blocking read on a thread of its own.
            let holding = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), released = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                _ = try? database.read { _ in
                    holding.signal()
                    release.wait()
                }
                released.signal()
            }
            holding.wait()
            let finished = Locked(false)
            let waiting = Task {
                try await database.read { db in
                    defer { finished.withLock { $0 = true } }
                    return (Probe.inCallingTask, try db.queryValue("SELECT count(*) FROM t", as: Int.self))
                }
            }
            // The read is waiting for the pool's reader (the pool says so; no sleep).
            #expect(await PooledReads.waiting(database), "the read did not wait for the busy reader")
            #expect(!finished.withLock { $0 }, "the read waited for the busy reader")
            release.signal()
            let (inTask, count) = try await waiting.value
            #expect(!inTask, "it ran on the database's queue, not in the task")
            #expect(count == 1)
            released.wait()
        }
        withExtendedLifetime(scratch) {}
    }

    @Test("a loop of reads that run in the task lets another task of its one-thread executor run before the loop ends")
    func readLoopLeavesRoom() async throws {
        let directory = TemporaryDirectory("read-pacing")
        let database = try ServiceAPITests.database(readers: 2, directory)
        // One thread: the other task runs only when the reading task suspends.
        let executor = SerialQueueExecutor()
        let otherRan = Locked(false)
        let reads = 5_000
        let readsBeforeTheOther = try await Task(executorPreference: executor) {
            let other = Task(executorPreference: executor) { otherRan.withLock { $0 = true } }
            defer { other.cancel() }
            for n in 0..<reads {
                _ = try await database.read { db in try db.queryValue("SELECT 1", as: Int.self) }
                if otherRan.withLock({ $0 }) { return n }
            }
            return reads
        }.value
        #expect(readsBeforeTheOther < reads, "\(reads) reads in the task never suspended it")
    }

    @Test("where Swift does not rank overloads by context (top-level code, closures without await), the blocking overloads are refused, not run")
    func contextsSwiftDoesNotRank() throws {
        let snippet = """
            import EncryptedSQLite
            func use(_ database: EncryptedDatabase) async throws {
                let task = Task { try database.read { db in try db.queryValue("SELECT 1", as: Int.self) } }
                _ = try await task.value
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try database.writeWithoutTransaction { db in try db.execute("SELECT 1") } }
                    try await group.waitForAll()
                }
                _ = try await database.write { db in try db.execute("SELECT 1") }
            }
            let database: EncryptedDatabase? = nil
            _ = try await database?.write { db in try db.execute("SELECT 1") }

            """
        let output = try Self.typeCheck(mainSwift: snippet)
        func diagnostics(line: Int) -> [Substring] {
            output.split(separator: "\n").filter { $0.contains("main.swift:\(line):") }
        }
        func refused(_ method: String) -> (Substring) -> Bool {
            { $0.contains("instance method '\(method)' is unavailable from asynchronous contexts") }
        }
        // A closure without `await` in async code (Task, task group): refused, where it used to run
        // the blocking overload on a thread of the cooperative pool without a word.
        #expect(diagnostics(line: 3).contains(where: refused("read")), "\(output)")
        #expect(diagnostics(line: 6).contains(where: refused("writeWithoutTransaction")), "\(output)")
        // Top-level code: Swift 6.3 picks the blocking overload even after `await` (it does not
        // treat top-level code as async when ranking overloads); refused, where it used to run
        // with only the warning "no 'async' operations occur within 'await' expression".
        #expect(diagnostics(line: 12).contains(where: refused("write")), "\(output)")
        // The async function's `try await` (line 9) is fine: no diagnostic on it.
        #expect(diagnostics(line: 9).isEmpty, "\(output)")
        // Nothing else.
        #expect(output.split(separator: "\n").filter { $0.contains("main.swift:") }.count == 4, "\(output)")
    }

    /// Type-checks `mainSwift` as a program's main.swift against the modules `swift build` made
    /// for these tests; returns the compiler's diagnostics.
    static func typeCheck(mainSwift: String) throws -> String {
        let directory = TemporaryDirectory("typecheck")
        let file = directory.file("main.swift")
        try mainSwift.write(toFile: file, atomically: true, encoding: .utf8)
        let products = URL(fileURLWithPath: BuiltProduct.path("x")).deletingLastPathComponent()
        let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let checkouts = products.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("checkouts")
        let moduleMaps = [
            packageRoot.appendingPathComponent("Sources/CSQLCipher"), packageRoot.appendingPathComponent("Sources/COpenSSLCrypto"),
            packageRoot.appendingPathComponent("Sources/CPKCS11"),
            checkouts.appendingPathComponent("Yams/Sources/CYaml/include"),
        ].flatMap { ["-Xcc", "-fmodule-map-file=\($0.appendingPathComponent("module.modulemap").path)"] }
        // The system libraries' own header folders (p11-kit's pkcs11.h), as SwiftPM finds them.
        let pkgConfig = try #require(ProcessRunner.which("pkg-config"))
        let headerFolders = try ProcessRunner.run(pkgConfig, ["--cflags", "p11-kit-1"]).stdout
            .split(whereSeparator: \.isWhitespace).flatMap { ["-Xcc", String($0)] }
        let swiftc = try #require(ProcessRunner.which("swiftc"))
        let result = try ProcessRunner.run(
            swiftc, ["-typecheck", "-swift-version", "6", "-I", products.appendingPathComponent("Modules").path] + moduleMaps + headerFolders + [file])
        #expect(!result.stderr.contains("no such module"), "\(result.stderr)")
        return result.stdout + result.stderr
    }
}
