import CSQLCipher
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// SQLite's "copy this buffer now" destructor, which the C macro `SQLITE_TRANSIENT` spells.
package let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

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
    /// The bytes of the bound text and blob values, which SQLite reads in place.
    @exclusivity(unchecked)
    private var bindingBytes = BindingBuffer()
    /// `true` once the statement has stepped and not been reset since: binding then needs a reset.
    @exclusivity(unchecked)
    @usableFromInline
    var needsReset = false

    /// Decodes the current row into `T`, reading the columns in place, with the statement's
    /// decoder (``ColumnsDecoder``), made once.
    @usableFromInline
    func decodeRow<T: Decodable>(_ type: T.Type) throws -> T {
        if rowDecoderReference == nil {
            rowDecoderReference = .passRetained(ColumnsDecoder(statement: .passUnretained(self)))
        }
        return try rowDecoderReference.unsafelyUnwrapped._withUnsafeGuaranteedRef { try T(from: $0) }
    }

    /// The column a row's request for `name` reads (by a name getter or by decoding), or `nil`
    /// when there is none: exact match first, then case-insensitive. The answers are kept across
    /// rows (``ColumnRequestCache``); each step starts a new row of requests.
    @inlinable @inline(__always)
    func column(forRequest name: String) -> Int? {
        if let cached = columnRequests.next(name) { return cached < 0 ? nil : cached }
        return lookUpColumn(forRequest: name)
    }

    /// ``column(forRequest:)`` when the cache missed: looks the name up and records it.
    @usableFromInline
    func lookUpColumn(forRequest name: String) -> Int? {
        let found = layout.index(of: name)
        columnRequests.record(name, column: found ?? -1)
        return found
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

    /// Resets the statement and binds new arguments to all of its parameters.
    /// - Throws: ``StatementError`` when the arguments do not fit the parameters, ``SQLiteError``
    ///   when SQLite refuses a value.
    public func bind(_ arguments: StatementArguments) throws {
        var consumed = 0
        var usedNames = Set<String>()
        try bind(arguments, positionalOffset: &consumed, usedNames: &usedNames)
        try checkAllConsumed(arguments, consumed: consumed, usedNames: usedNames)
    }

    /// Binds the part of `arguments` this statement needs, starting at `positionalOffset` for
    /// positional arguments; used to spread one argument list over several statements.
    ///
    /// Every parameter slot gets a value, or the call throws and every slot is `NULL` (see
    /// ``BindingBuffer`` for why that matters).
    func bind(_ arguments: StatementArguments, positionalOffset: inout Int, usedNames: inout Set<String>) throws {
        startBinding()
        do {
            try bindAllSlots(arguments, positionalOffset: &positionalOffset, usedNames: &usedNames)
        } catch {
            bindingFailed()
            throw error
        }
    }

    private func bindAllSlots(_ arguments: StatementArguments, positionalOffset: inout Int, usedNames: inout Set<String>) throws {
        let count = parameterCount
        guard count > 0 else { return }
        switch arguments.storage {
        case .positional(let values):
            guard positionalOffset + count <= values.count else {
                throw StatementError.argumentCountMismatch(expected: positionalOffset + count, given: values.count, sql: sql)
            }
            for slot in 1...count {
                try bind(values[positionalOffset + slot - 1], at: Int32(slot))
            }
            positionalOffset += count
        case .named(let values):
            for slot in 1...count {
                guard let cName = sqlite3_bind_parameter_name(handle, Int32(slot)) else {
                    throw StatementError.unnamedParameterWithNamedArguments(index: slot, sql: sql)
                }
                let name = String(cString: cName)
                let bare = StatementArguments.bareName(name)
                if name.hasPrefix("?") {
                    throw StatementError.unnamedParameterWithNamedArguments(index: slot, sql: sql)
                }
                guard let value = values[bare] else {
                    throw StatementError.missingNamedArgument(name: name, sql: sql)
                }
                usedNames.insert(bare)
                try bind(value, at: Int32(slot))
            }
        }
    }

    func checkAllConsumed(_ arguments: StatementArguments, consumed: Int, usedNames: Set<String>) throws {
        switch arguments.storage {
        case .positional(let values):
            if consumed != values.count {
                throw StatementError.argumentCountMismatch(expected: consumed, given: values.count, sql: sql)
            }
        case .named(let values):
            if let unused = values.keys.sorted().first(where: { !usedNames.contains($0) }) {
                throw StatementError.unusedNamedArgument(name: unused, sql: sql)
            }
        }
    }

    /// Starts a set of bindings that binds every slot: resets the statement when it has run, and
    /// reuses the bound bytes' buffer.
    @usableFromInline
    func startBinding() {
        if needsReset { reset() }
        bindingBytes.startBinding()
    }

    /// After a failed bind: every slot becomes `NULL`, so none points at replaced bytes.
    @usableFromInline
    func bindingFailed() {
        sqlite3_clear_bindings(handle)
    }

    /// Binds one value to a parameter slot (1-based), within a set of bindings begun with
    /// ``startBinding()``. Text and blobs up to ``BindingBuffer/largestValue`` bytes are bound in
    /// place from the statement's buffer; larger ones are copied by SQLite.
    @usableFromInline
    func bind(_ value: DatabaseValue, at slot: Int32) throws {
        let code: Int32
        switch value {
        case .null:
            code = sqlite3_bind_null(handle, slot)
        case .integer(let integer):
            code = sqlite3_bind_int64(handle, slot, integer)
        case .real(let real):
            code = sqlite3_bind_double(handle, slot, real)
        case .text(let text):
            code = bindText(text, at: slot)
        case .blob(let bytes):
            code = bytes.withUnsafeBytes { buffer in
                guard let base = buffer.baseAddress, buffer.count > 0 else {
                    return sqlite3_bind_zeroblob(handle, slot, 0)
                }
                if let stored = bindingBytes.store(buffer) {
                    return sqlite3_bind_blob(handle, slot, stored, Int32(buffer.count), nil)
                }
                return sqlite3_bind_blob(handle, slot, base, Int32(buffer.count), sqliteTransient)
            }
        }
        guard code == SQLITE_OK else { throw connection.error(code: code, sql: sql) }
    }

    /// Binds one typed value to a parameter slot (1-based), within a set of bindings begun with
    /// ``startBinding()``: `Int64`, `Int`, `Double` and `String` directly, other types through
    /// their ``DatabaseValueConvertible/databaseValue``, with the same result.
    @inlinable @inline(__always)
    func bindValue<Value: DatabaseValueConvertible>(_ value: Value, at slot: Int32) throws {
        let code: Int32
        if Value.self == Int64.self {
            code = sqlite3_bind_int64(handle, slot, unsafeBitCast(value, to: Int64.self))
        } else if Value.self == Int.self {
            code = sqlite3_bind_int64(handle, slot, Int64(unsafeBitCast(value, to: Int.self)))
        } else if Value.self == Double.self {
            code = sqlite3_bind_double(handle, slot, unsafeBitCast(value, to: Double.self))
        } else if Value.self == String.self {
            code = bindText(unsafeBitCast(value, to: String.self), at: slot)
        } else {
            return try bind(value.databaseValue, at: slot)
        }
        guard code == SQLITE_OK else { throw bindingError(code) }
    }

    /// The error for a value SQLite refused to bind.
    @usableFromInline
    func bindingError(_ code: Int32) -> SQLiteError {
        connection.error(code: code, sql: sql)
    }

    /// Binds a string as text (see `bindText(_:at:)` for bytes).
    @usableFromInline
    func bindText(_ text: String, at slot: Int32) -> Int32 {
        text.utf8.withContiguousStorageIfAvailable { bindText(UnsafeRawBufferPointer($0), at: slot) } ?? {
            var text = text
            return text.withUTF8 { bindText(UnsafeRawBufferPointer($0), at: slot) }
        }()
    }

    /// Binds UTF-8 bytes as text: in place from the statement's buffer, or copied by SQLite
    /// when too large for it.
    @inline(__always)
    private func bindText(_ bytes: UnsafeRawBufferPointer, at slot: Int32) -> Int32 {
        // An empty buffer may have no base address; SQLite would bind NULL for it.
        guard bytes.count > 0 else { return sqlite3_bind_text(handle, slot, "", 0, sqliteTransient) }
        if let stored = bindingBytes.store(bytes) {
            return sqlite3_bind_text(handle, slot, stored.assumingMemoryBound(to: CChar.self), Int32(bytes.count), nil)
        }
        return sqlite3_bind_text(handle, slot, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(bytes.count), sqliteTransient)
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

    /// Resets, binds `arguments` and runs the statement to completion, ignoring any rows.
    /// - Throws: ``StatementError`` or ``SQLiteError``.
    public func execute(_ arguments: StatementArguments = StatementArguments()) throws {
        try bind(arguments)
        while try step() {}
        reset()
    }

    /// Resets, binds `arguments` and returns every row.
    /// - Throws: ``StatementError`` or ``SQLiteError``.
    public func fetchAll(_ arguments: StatementArguments = StatementArguments()) throws -> [Row] {
        try bind(arguments)
        defer { reset() }
        var rows: [Row] = []
        while try step() { rows.append(row) }
        return rows
    }

    /// Resets, binds `arguments` and returns the first row, or `nil` when there is none.
    /// - Throws: ``StatementError`` or ``SQLiteError``.
    public func fetchOne(_ arguments: StatementArguments = StatementArguments()) throws -> Row? {
        try bind(arguments)
        defer { reset() }
        return try step() ? row : nil
    }

    /// The current row, after ``step()`` returned `true`.
    public var row: Row {
        let layout = self.layout
        var values: [DatabaseValue] = []
        values.reserveCapacity(layout.names.count)
        for index in 0..<Int32(layout.names.count) { values.append(value(at: index)) }
        return Row(layout: layout, values: values)
    }

    /// The current row's value at a column index, without building a ``Row``.
    public func value(at index: Int32) -> DatabaseValue {
        DatabaseValue(sqliteValue: sqlite3_column_value(handle, index))
    }

    /// The current row's integer at a column index (SQLite's conversion rules apply; `NULL` is 0).
    public func int64(at index: Int32) -> Int64 { sqlite3_column_int64(handle, index) }

    /// The current row's real at a column index (SQLite's conversion rules apply; `NULL` is 0).
    public func double(at index: Int32) -> Double { sqlite3_column_double(handle, index) }

    /// The current row's text at a column index (SQLite's conversion rules apply; `NULL` is "").
    public func text(at index: Int32) -> String {
        guard let base = sqlite3_column_text(handle, index) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, index))
        return String(decoding: UnsafeBufferPointer(start: base, count: count), as: UTF8.self)
    }

    /// `true` when the current row's value at a column index is `NULL`.
    public func isNull(at index: Int32) -> Bool { sqlite3_column_type(handle, index) == SQLITE_NULL }
}
