@testable import CipherFormats
@testable import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Testing
import TestSupport

private final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [Int] = []
    func add(_ value: Int) { lock.withLock { values.append(value) } }
    var all: [Int] { lock.withLock { values } }
}

@Suite("Fleet rotation (library API)", .ownThread)
struct FleetRotationTests {
    @Test("rotates many databases in-process with bounded parallelism; bad ones fail on their own; a second run finds the rest current")
    func inProcessFleet() throws {
        let directory = TemporaryDirectory("fleet-lib")
        let ring = TestKeyring([.passphrase, .hex], in: directory)
        let template = directory.file("template.sqlite")
        try Fixture.createWithShell(at: template, key: ring.keys[0].shellKey, rows: 10)
        var databases: [FleetDatabase] = []
        for index in 0..<12 {
            let path = directory.file("tenant-\(index).sqlite")
            if index == 5 {
                _ = FileManager.default.createFile(atPath: path, contents: Data((0..<4096).map { _ in UInt8.random(in: 0...255) }))
            } else {
                try TestFiles.copy(template, to: path)
            }
            databases.append(FleetDatabase(path: path, keys: try ring.keyList(database: path)))
        }
        databases.append(FleetDatabase(path: directory.file("unlisted.sqlite"), keyError: .emptyKeyList(database: "unlisted.sqlite")))

        let progressed = Counter()
        let report = FleetRotation(databases: databases, jobs: 3).run { progress, _ in progressed.add(progress.done) }
        #expect(report.outcomes.map(\.path) == databases.map(\.path))
        #expect(progressed.all == Array(1...13))
        #expect(report.rotated == 11)
        #expect(report.failures.count == 2)
        #expect(report.failures.map(\.path) == [directory.file("tenant-5.sqlite"), directory.file("unlisted.sqlite")])
        #expect(report.jobs == 3)
        for index in [0, 6, 11] {
            #expect(try SQLCipherShell.opens(directory.file("tenant-\(index).sqlite"), with: ring.keys[1].shellKey))
        }

        let again = FleetRotation(databases: databases, jobs: 2).run()
        #expect(again.rotated == 0 && again.alreadyCurrent == 11 && again.failures.count == 2)
        let checked = FleetRotation(databases: databases, jobs: 2, checkOnly: true).run()
        #expect(checked.alreadyCurrent == 11 && checked.needingRotation == 0)
    }
}
