import EncryptedSQLite
import Hummingbird

/// One note: a row of the `notes` table, and the JSON the API sends for it.
struct Note: TableRecord, ResponseEncodable, Sendable {
    static let databaseTableName = "notes"
    /// The row id SQLite assigned (`nil` before the insert).
    var id: Int64?
    /// The note's text.
    var text: String
    /// Who wrote it (indexed: lists and searches by author use the index).
    var author: String

    mutating func didInsert(rowID: Int64) { id = rowID }
}

/// The body of `POST /notes`.
struct NewNote: Decodable, Sendable {
    var text: String
    var author: String
}

/// A page of notes, newest first, and the `before` value that asks for the next page.
struct NotePage: ResponseEncodable, Sendable {
    var notes: [Note]
    var next: Int64?
}

/// The server's schema: one migration per change, each run once in its own transaction when the
/// database opens.
enum NotesSchema {
    static func migrator() throws -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        try migrator.registerSQLMigration("0001_notes", sql: """
            CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT NOT NULL, author TEXT NOT NULL);
            CREATE INDEX notes_by_author ON notes(author);
            """)
        return migrator
    }
}
