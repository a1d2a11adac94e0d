import EncryptedSQLite

/// The API's data access over one ``EncryptedDatabase``: writes go to its writer in one
/// `IMMEDIATE` transaction each, reads to its reader pool. Every method is `async` and runs its SQL
/// on the database's own queue, off Swift's cooperative pool.
struct NoteStore: Sendable {
    let database: EncryptedDatabase

    /// Stores a note; returns it with its new id once the transaction committed.
    func add(_ new: NewNote) async throws -> Note {
        try await database.write { db in
            var note = Note(id: nil, text: new.text, author: new.author)
            try db.insert(&note)
            return note
        }
    }

    /// The note with this id, or `nil`.
    func note(id: Int64) async throws -> Note? {
        try await database.read { db in
            try db.query(Note.self, "SELECT id, text, author FROM notes WHERE id = ?", [id]).first
        }
    }

    /// Up to `limit` notes with an id below `before` (all when `nil`), newest first, of one author
    /// when `author` is given.
    func list(author: String?, before: Int64?, limit: Int) async throws -> [Note] {
        try await database.read { db in
            try db.query(Note.self, """
                SELECT id, text, author FROM notes
                WHERE (?1 IS NULL OR author = ?1) AND id < ?2
                ORDER BY id DESC LIMIT ?3
                """, [author, before ?? Int64.max, limit])
        }
    }

    /// Up to `limit` notes whose text contains `term` (case-insensitive for ASCII), newest first,
    /// of one author when `author` is given. A scan, stopped at `limit` matches: keep it for terms
    /// that are not rare, or give an author.
    func search(_ term: String, author: String?, limit: Int) async throws -> [Note] {
        let pattern = "%" + term.replacing("\\", with: "\\\\").replacing("%", with: "\\%").replacing("_", with: "\\_") + "%"
        return try await database.read { db in
            try db.query(Note.self, """
                SELECT id, text, author FROM notes
                WHERE (?1 IS NULL OR author = ?1) AND text LIKE ?2 ESCAPE '\\'
                ORDER BY id DESC LIMIT ?3
                """, [author, pattern, limit])
        }
    }

    /// How many notes there are.
    func count() async throws -> Int {
        try await database.read { db in try db.queryValue("SELECT count(*) FROM notes", as: Int.self) ?? 0 }
    }
}
