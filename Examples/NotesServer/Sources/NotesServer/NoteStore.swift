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
    /// when `author` is given (through the author index: the SQL names the author only when there is
    /// one, since `(? IS NULL OR author = ?)` keeps SQLite from using the index).
    func list(author: String?, before: Int64?, limit: Int) async throws -> [Note] {
        var values: [String: (any DatabaseValueConvertible)?] = ["before": before ?? Int64.max, "limit": limit]
        if let author { values["author"] = author }
        let (filter, arguments) = (author == nil ? "" : "author = :author AND ", StatementArguments(values))
        return try await database.read { db in
            try db.query(Note.self, "SELECT id, text, author FROM notes WHERE \(filter)id < :before ORDER BY id DESC LIMIT :limit", arguments)
        }
    }

    /// Up to `limit` notes whose text contains `term` (case-insensitive for ASCII), newest first,
    /// of one author when `author` is given. A scan, stopped at `limit` matches: keep it for terms
    /// that are not rare, or give an author.
    func search(_ term: String, author: String?, limit: Int) async throws -> [Note] {
        let pattern = "%" + term.replacing("\\", with: "\\\\").replacing("%", with: "\\%").replacing("_", with: "\\_") + "%"
        var values: [String: (any DatabaseValueConvertible)?] = ["pattern": pattern, "limit": limit]
        if let author { values["author"] = author }
        let (filter, arguments) = (author == nil ? "" : "author = :author AND ", StatementArguments(values))
        return try await database.read { db in
            try db.query(Note.self, """
                SELECT id, text, author FROM notes WHERE \(filter)text LIKE :pattern ESCAPE '\\'
                ORDER BY id DESC LIMIT :limit
                """, arguments)
        }
    }

    /// How many notes there are.
    func count() async throws -> Int {
        try await database.read { db in try db.queryValue("SELECT count(*) FROM notes", as: Int.self) ?? 0 }
    }
}
