import Foundation

/// Reads `.sql` migration files: `<version>_<name>.sql`, an up section, and an optional down
/// section after a line `-- down`.
///
/// ```sql
/// -- 0002_add_email.sql
/// ALTER TABLE users ADD COLUMN email TEXT;
/// -- down
/// CREATE TABLE users_old AS SELECT id, name FROM users; DROP TABLE users; ALTER TABLE users_old RENAME TO users;
/// ```
enum SQLMigrationFile {
    /// Splits a migration's text into its up and down SQL at the first line that is `-- down` (or
    /// `--down`, any case, surrounded by spaces or tabs). Lines may end with LF, CRLF or CR; the
    /// SQL on either side is kept exactly as written (only trimmed at its ends).
    static func sections(of text: String) -> (up: String, down: String?) {
        func trimmed(_ part: Substring) -> String { part.trimmingCharacters(in: .whitespacesAndNewlines) }
        var lineStart = text.startIndex
        while true {
            // "\r\n" is one Character in Swift, so a CRLF file must be split on it explicitly.
            let lineEnd = text[lineStart...].firstIndex { $0 == "\n" || $0 == "\r\n" || $0 == "\r" } ?? text.endIndex
            if isDownMarker(text[lineStart..<lineEnd]) {
                let down = trimmed(text[(lineEnd == text.endIndex ? lineEnd : text.index(after: lineEnd))...])
                return (trimmed(text[..<lineStart]), down.isEmpty ? nil : down)
            }
            guard lineEnd < text.endIndex else { return (trimmed(text[...]), nil) }
            lineStart = text.index(after: lineEnd)
        }
    }

    /// `true` for the line that starts the down section.
    static func isDownMarker(_ line: Substring) -> Bool {
        let marker = line.trimmingCharacters(in: .whitespaces).lowercased()
        return marker == "-- down" || marker == "--down"
    }

    /// The identifier for a file name (`0001_create_users.sql` → `0001_create_users`), or `nil`
    /// when the name does not start with a version of ASCII digits, an underscore and a name.
    static func identifier(forFileName name: String) -> String? {
        guard name.hasSuffix(".sql") else { return nil }
        let identifier = String(name.dropLast(4))
        // By Unicode scalar: a name starting with a combining mark must not hide the underscore.
        let scalars = identifier.unicodeScalars
        let digits = scalars.prefix { ("0"..."9").contains($0) }
        let rest = scalars.dropFirst(digits.count)
        guard !digits.isEmpty, rest.first == "_", rest.count > 1 else { return nil }
        return identifier
    }

    /// Every migration in `folder`, from its `.sql` files.
    static func load(folder: String) throws(MigrationError) -> [Migration] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: folder)
        } catch {
            throw .folderUnreadable(path: folder, reason: (error as NSError).localizedDescription)
        }
        var migrations: [Migration] = []
        for name in names.sorted() where name.hasSuffix(".sql") {
            let path = (folder as NSString).appendingPathComponent(name)
            guard let identifier = identifier(forFileName: name) else {
                throw .invalidFileName(path: path)
            }
            guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
                throw .fileUnreadable(path: path)
            }
            let (up, down) = sections(of: text)
            guard !up.isEmpty else { throw .emptyMigration(identifier: identifier) }
            migrations.append(Migration(identifier: identifier, sourceFile: path, checksum: MigrationChecksum.of(text), body: .sql(up: up, down: down)))
        }
        return migrations
    }
}
