import Foundation

extension UUID: DatabaseValueConvertible {
    /// Stored as text in the 8-4-4-4-12 form with uppercase hexadecimal digits (``uuidString``,
    /// `E621E1F8-C36C-495A-93FC-0C247A3E6E5F`) — the form a `Codable` record's `UUID` property is
    /// stored in too.
    public var databaseValue: DatabaseValue { .text(uuidString) }

    /// Reads text in the 8-4-4-4-12 form, in either case, and 16-byte blobs (the UUID's bytes in
    /// order, as GRDB stores UUIDs); `nil` for anything else.
    public init?(databaseValue: DatabaseValue) {
        switch databaseValue {
        case .text(let text):
            guard let uuid = UUID(uuidString: text) else { return nil }
            self = uuid
        case .blob(let b):
            guard b.count == 16 else { return nil }
            self = UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
        default:
            return nil
        }
    }

    /// What `UUID` reads, for error messages.
    static let acceptedForms = "text in the 8-4-4-4-12 form (either case) or a 16-byte BLOB"
}
