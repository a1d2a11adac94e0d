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
    /// Splits a migration's text into its up and down SQL.
    static func sections(of text: String) -> (up: String, down: String?) {
        var up: [Substring] = []
        var down: [Substring]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let marker = line.trimmingCharacters(in: .whitespaces).lowercased()
            if down == nil, marker == "-- down" || marker == "--down" {
                down = []
                continue
            }
            if down != nil { down!.append(line) } else { up.append(line) }
        }
        let upText = up.joined(separator: "\n").trimmingCharacters(in: .whitespacesAndNewlines)
        let downText = down.map { $0.joined(separator: "\n").trimmingCharacters(in: .whitespacesAndNewlines) }
        return (upText, downText?.isEmpty == true ? nil : downText)
    }

    /// The identifier for a file name (`0001_create_users.sql` → `0001_create_users`), or `nil`
    /// when the name does not have a version prefix.
    static func identifier(forFileName name: String) -> String? {
        guard name.hasSuffix(".sql") else { return nil }
        let identifier = String(name.dropLast(4))
        let digits = identifier.prefix(while: \.isNumber)
        guard !digits.isEmpty, identifier.dropFirst(digits.count).first == "_", identifier.count > digits.count + 1 else { return nil }
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
