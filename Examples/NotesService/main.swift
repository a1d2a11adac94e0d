import EncryptedSQLite
import Foundation
import Logging

// notes-service-example <Keys file> <database>
// Opens the database with the keys the Keys file lists for it (rotating it to the current key
// if it is on an older one), migrates it, then serves a burst of concurrent requests.
let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    FileHandle.standardError.write(Data("usage: notes-service-example <Keys file> <database>\n".utf8))
    exit(64)
}
let (keysPath, databasePath) = (arguments[1], arguments[2])

var logger = Logger(label: "notes-service")
logger.logLevel = .info

let database = try EncryptedDatabase(
    path: databasePath, keysFile: keysPath,
    options: OpenOptions(createIfMissing: true, concurrentReaders: 2, logger: logger),
    migrator: try NotesMigrations.migrator())
let report = database.report
logger.info("database ready", metadata: [
    "key": "\(database.keys.currentID)", "rotated": "\(report.rotated)", "migrations": "\(database.appliedMigrations.count)",
])

let repository = NoteRepository(database: database)
try await withThrowingTaskGroup(of: Note.self) { group in
    for number in 1...20 {
        group.addTask { try await repository.add("note \(number)", by: number.isMultiple(of: 2) ? "ann" : "bob") }
    }
    for try await _ in group {}
}
let annNotes = try await repository.notes(by: "ann")
let total = try await repository.count()
print("opened-with=\(report.openedWithKeyID) rotated=\(report.rotated) notes=\(total) ann=\(annNotes.count)")
