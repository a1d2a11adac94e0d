import EncryptedSQLite
import SQLKit

/// One result row, copied out of the statement: its column names (shared by every row of the
/// result) and values, read on demand as the types Fluent and SQLKit ask for.
struct EncryptedSQLiteRow: SQLRow, CustomStringConvertible {
    let columns: [String]
    let values: [DatabaseValue]
    let decoder: ValueDecoder

    var allColumns: [String] { columns }

    func contains(column: String) -> Bool { columns.contains(column) }

    private func value(_ column: String) throws -> DatabaseValue {
        guard let index = columns.firstIndex(of: column) else {
            throw DecodingError.keyNotFound(SQLCodingKey(column), .init(codingPath: [], debugDescription: "No column \(column) in the row (columns: \(columns.joined(separator: ", ")))."))
        }
        return values[index]
    }

    func decodeNil(column: String) throws -> Bool {
        try value(column).isNull
    }

    func decode<D: Decodable>(column: String, as type: D.Type) throws -> D {
        try decoder.decode(D.self, from: value(column))
    }

    var description: String {
        "[" + zip(columns, values).map { "\($0): \($1)" }.joined(separator: ", ") + "]"
    }
}

/// A coding key for a column name.
struct SQLCodingKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { return nil }
}
