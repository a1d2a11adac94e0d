import CSQLCipher
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// SQLite's "copy this buffer now" destructor, which the C macro `SQLITE_TRANSIENT` spells.
let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// A prepared SQL statement: bind arguments, step through rows, reset, and run again.
///
/// Create one with ``Connection/prepare(_:)``. A statement belongs to its connection and to the
/// thread that uses that connection; it keeps the connection open while it lives.
///
/// ```swift
/// let insert = try db.prepare("INSERT INTO t(name) VALUES (?)")
/// for name in names { try insert.execute([name]) }
/// ```
public final class Statement {
    @usableFromInline
    let handle: OpaquePointer
    /// The connection this statement runs on.
    public let connection: Connection
    /// The SQL text of this statement.
    public let sql: String
    // The mutable state below is touched for every row and every bound value. A statement is
    // used by one thread at a time and none of these accesses overlaps another (no closure runs
    // while one is in progress), so the runtime exclusivity checks, which would cost more than
    // SQLite's own work for a bind, are turned off for them.
    @exclusivity(unchecked)
    private var layoutCache: ColumnLayout?
    @exclusivity(unchecked)
    @usableFromInline
    var columnRequests = ColumnRequestCache()
    /// The decoder of this statement's rows, made on first use; retained here and released in
    /// `deinit` (kept unmanaged so that using it costs no reference counting).
    @exclusivity(unchecked)
    private var rowDecoderReference: Unmanaged<ColumnsDecoder>?
    /// The columns of the last ``RowDecodable`` type read from this statement's rows, resolved
    /// against its result columns (``recordColumns(for:)``).
    @exclusivity(unchecked)
    var recordColumnsCache: (type: ObjectIdentifier, columns: RowColumns)?
    /// The last type ``decodeRow(_:)`` decoded, and whether it is ``RowDecodable``: the dynamic
    /// cast is made once per type, not once per row.
    @exclusivity(unchecked)
    private var decodedType: (type: ObjectIdentifier, record: (any RowDecodable.Type)?)?
    /// The bytes of the bound text and blob values, which SQLite reads in place.
    @exclusivity(unchecked)
    var bindingBytes = BindingBuffer()
    /// `true` once the statement has stepped and not been reset since: binding then needs a reset.
    @exclusivity(unchecked)
    @usableFromInline
    var needsReset = false

    /// Decodes the current row into `T`, reading the columns in place: by position when `T` is
    /// ``RowDecodable``, else with the statement's decoder (``ColumnsDecoder``), made once.
    @usableFromInline
    func decodeRow<T: Decodable>(_ type: T.Type) throws -> T {
        let recordType: (any RowDecodable.Type)?
        if let decodedType, decodedType.type == ObjectIdentifier(T.self) {
            recordType = decodedType.record
        } else {
            recordType = T.self as? any RowDecodable.Type
            decodedType = (ObjectIdentifier(T.self), recordType)
        }
        if let recordType { return try decodeRecord(recordType, as: T.self) }
        if rowDecoderReference == nil {
            rowDecoderReference = .passRetained(ColumnsDecoder(statement: .passUnretained(self)))
        }
        return try rowDecoderReference.unsafelyUnwrapped._withUnsafeGuaranteedRef { try T(from: $0) }
    }

    init(connection: Connection, handle: OpaquePointer, sql: String) {
        self.connection = connection
        self.handle = handle
        self.sql = sql
    }

    /// Finalizes the statement, releases its decoder, and then (stored properties go after
    /// `deinit`) wipes and frees the bound bytes SQLite was reading.
    deinit {
        sqlite3_finalize(handle)
        rowDecoderReference?.release()
    }

    /// The number of parameter slots (`?NNN` counts up to its largest NNN).
    public var parameterCount: Int { Int(sqlite3_bind_parameter_count(handle)) }

    /// The number of result columns (0 for statements that return no rows).
    public var columnCount: Int { Int(sqlite3_column_count(handle)) }

    /// The result column names, in order.
    public var columnNames: [String] { layout.names }

    /// `true` when the statement does not write to the database.
    public var isReadOnly: Bool { sqlite3_stmt_readonly(handle) != 0 }

    var layout: ColumnLayout {
        if let layoutCache { return layoutCache }
        let names = (0..<Int32(columnCount)).map { String(cString: sqlite3_column_name(handle, $0)) }
        let layout = ColumnLayout(names: names)
        layoutCache = layout
        return layout
    }

    /// Drops the remembered column names and name lookups when SQLite re-prepared the statement
    /// after a schema change (it does so inside the first step of an execution) and its result
    /// columns changed: a table rebuilt with its columns in another order, a column added to a
    /// `SELECT *`. SQLite 3.15 has no re-prepare counter, so the names are compared, once per
    /// execution.
    private func forgetColumnsIfReprepared() {
        guard let layout = layoutCache else { return }
        let count = sqlite3_column_count(handle)
        var unchanged = Int(count) == layout.names.count
        var index: Int32 = 0
        while unchanged, index < count {
            if let current = sqlite3_column_name(handle, index) {
                unchanged = layout.names[Int(index)].withCString { strcmp($0, current) == 0 }
            } else {
                unchanged = false
            }
            index += 1
        }
        if !unchanged {
            layoutCache = nil
            columnRequests = ColumnRequestCache()
            recordColumnsCache = nil
        }
    }

    /// Resets the statement so that it runs again from the start; bindings are kept.
    public func reset() {
        sqlite3_reset(handle)
        needsReset = false
    }

    /// Removes all bindings (every parameter becomes `NULL`) and wipes their bytes.
    public func clearBindings() {
        sqlite3_clear_bindings(handle)
        bindingBytes.startBinding()
    }

    /// Runs the statement to its next row.
    ///
    /// - Returns: `true` when a row is available (read it with ``row`` or the column accessors),
    ///   `false` when the statement is done.
    /// - Throws: ``SQLiteError``; the statement is reset so that it can run again.
    @discardableResult
    public func step() throws -> Bool {
        let startsExecution = !needsReset
        if startsExecution, connection.readsOnly, sqlite3_stmt_readonly(handle) == 0 { try connection.turnOnQueryOnly() }
        needsReset = true
        let code = sqlite3_step(handle)
        if startsExecution, layoutCache != nil { forgetColumnsIfReprepared() }
        switch code {
        case SQLITE_ROW:
            columnRequests.startRow()
            return true
        case SQLITE_DONE: return false
        default:
            let error = connection.error(code: code, sql: sql)
            reset()
            throw error
        }
    }
}
