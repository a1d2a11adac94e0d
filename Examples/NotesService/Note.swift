import EncryptedSQLite

/// One note: a row of the `notes` table.
struct Note: TableRecord, Sendable {
    static let databaseTableName = "notes"
    var id: Int64?
    var text: String
    var author: String

    mutating func didInsert(rowID: Int64) { id = rowID }
}
