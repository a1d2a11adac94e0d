import EncryptedSQLite

/// The service's data access: async methods over one `EncryptedDatabase`.
struct NoteRepository: Sendable {
    let database: EncryptedDatabase

    /// Stores a note and returns it with its new id.
    func add(_ text: String, by author: String) async throws -> Note {
        try await database.write { db in
            var note = Note(id: nil, text: text, author: author)
            try db.insert(&note)   // sets note.id through didInsert(rowID:)
            return note
        }
    }

    /// Every note of one author, oldest first.
    func notes(by author: String) async throws -> [Note] {
        try await database.read { db in
            try db.query(Note.self, "SELECT * FROM notes WHERE author = ? ORDER BY id", [author])
        }
    }

    /// How many notes there are.
    func count() async throws -> Int {
        try await database.read { db in try db.count(Note.self) }
    }
}
