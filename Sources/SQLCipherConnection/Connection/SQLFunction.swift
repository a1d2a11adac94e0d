import CSQLCipher

extension Connection {
    /// Registers a scalar SQL function implemented by a Swift closure.
    ///
    /// ```swift
    /// try db.createFunction("reverse", argumentCount: 1, deterministic: true) { arguments in
    ///     guard case .text(let text) = arguments[0] else { return DatabaseValue.null }
    ///     return String(text.reversed())
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - name: The SQL name.
    ///   - argumentCount: The number of arguments, or `nil` for any number.
    ///   - deterministic: `true` when the result depends only on the arguments; SQLite can then
    ///     use the function in indexes and factor out repeated calls.
    ///   - body: Computes the result; a thrown error becomes the SQL error's message.
    /// - Throws: ``SQLiteError`` when SQLite refuses the registration.
    public func createFunction(
        _ name: String, argumentCount: Int? = nil, deterministic: Bool = false,
        _ body: @escaping ([DatabaseValue]) throws -> (any DatabaseValueConvertible)?
    ) throws {
        let box = SQLFunctionBox(body)
        var flags = SQLITE_UTF8
        if deterministic { flags |= SQLITE_DETERMINISTIC }
        let code = sqlite3_create_function_v2(
            handle, name, Int32(argumentCount ?? -1), flags, Unmanaged.passUnretained(box).toOpaque(),
            { context, count, values in
                let box = Unmanaged<SQLFunctionBox>.fromOpaque(sqlite3_user_data(context)).takeUnretainedValue()
                var arguments: [DatabaseValue] = []
                arguments.reserveCapacity(Int(count))
                for index in 0..<Int(count) { arguments.append(DatabaseValue(sqliteValue: values![index])) }
                do {
                    let result = try box.body(arguments)?.databaseValue ?? .null
                    result.setAsResult(of: context)
                } catch {
                    sqlite3_result_error(context, "\(error)", -1)
                }
            }, nil, nil, nil)
        guard code == SQLITE_OK else { throw self.error(code: code, sql: nil) }
        functionBoxes.append(box)
    }
}

/// Keeps a function's closure alive for as long as the connection.
final class SQLFunctionBox {
    let body: ([DatabaseValue]) throws -> (any DatabaseValueConvertible)?
    init(_ body: @escaping ([DatabaseValue]) throws -> (any DatabaseValueConvertible)?) { self.body = body }
}

extension DatabaseValue {
    /// The value of an `sqlite3_value`: a function argument, or a column of a statement's current
    /// row (`sqlite3_column_value`, read on the connection's thread).
    @usableFromInline
    init(sqliteValue value: OpaquePointer?) {
        switch sqlite3_value_type(value) {
        case SQLITE_INTEGER: self = .integer(sqlite3_value_int64(value))
        case SQLITE_FLOAT: self = .real(sqlite3_value_double(value))
        case SQLITE_TEXT: self = .text(Statement.string(from: value))
        case SQLITE_BLOB:
            let count = Int(sqlite3_value_bytes(value))
            self = .blob(sqlite3_value_blob(value).map { [UInt8](UnsafeRawBufferPointer(start: $0, count: count)) } ?? [])
        default: self = .null
        }
    }

    func setAsResult(of context: OpaquePointer?) {
        switch self {
        case .null: sqlite3_result_null(context)
        case .integer(let value): sqlite3_result_int64(context, value)
        case .real(let value): sqlite3_result_double(context, value)
        case .text(let text): sqlite3_result_text(context, text, -1, sqliteTransient)
        case .blob(let bytes):
            if bytes.isEmpty { sqlite3_result_zeroblob(context, 0); return }
            bytes.withUnsafeBytes { sqlite3_result_blob(context, $0.baseAddress, Int32($0.count), sqliteTransient) }
        }
    }
}
