import CSQLCipher

extension Statement {
    /// Resets the statement and binds new arguments to all of its parameters.
    /// - Throws: ``StatementError`` when the arguments do not fit the parameters, ``SQLiteError``
    ///   when SQLite refuses a value.
    public func bind(_ arguments: StatementArguments) throws {
        var consumed = 0
        var usedNames = Set<String>()
        try bind(arguments, positionalOffset: &consumed, usedNames: &usedNames)
        try checkAllConsumed(arguments, consumed: consumed, usedNames: usedNames)
    }

    /// Resets the statement and binds `values` to its parameters in order (slot 1, 2, …), without
    /// building ``StatementArguments``: for statements run many times with typed values. Text and
    /// blobs are bound in place from a buffer the statement reuses, not copied one by one.
    ///
    /// ```swift
    /// let insert = try db.prepare("INSERT INTO items(id, name, score) VALUES (?, ?, ?)")
    /// for item in items { try insert.execute(values: item.id, item.name, item.score) }
    /// ```
    /// - Throws: ``StatementError/argumentCountMismatch(expected:given:sql:)`` unless there is
    ///   exactly one value per parameter slot; ``SQLiteError`` when SQLite refuses a value (then
    ///   every parameter is `NULL`).
    @inlinable @inline(__always)
    public func bind<each Value: DatabaseValueConvertible>(values: repeat each Value) throws {
        var given: Int32 = 0
        for _ in repeat each values { given += 1 }
        try bind(count: given) { statement in
            var slot: Int32 = 0
            for value in repeat each values {
                slot += 1
                try statement.bindValue(value, at: slot)
            }
        }
    }

    /// Binds `count` values with `bindAll` (which binds slots 1…count): checks the count against
    /// the statement's parameters first, and after a failure leaves every parameter `NULL`.
    @inlinable @inline(__always)
    func bind(count given: Int32, _ bindAll: (Statement) throws -> Void) throws {
        let expected = sqlite3_bind_parameter_count(handle)
        guard given == expected else {
            throw StatementError.argumentCountMismatch(expected: Int(expected), given: Int(given), sql: sql)
        }
        startBinding()
        do {
            try bindAll(self)
        } catch {
            bindingFailed()
            throw error
        }
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

    /// Binds every parameter slot from `arguments` (see ``bind(_:positionalOffset:usedNames:)``).
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

    /// Throws unless the statements that bound `arguments` used every positional argument
    /// (`consumed` of them) or every named one (`usedNames`).
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

    /// Throws the error for `arguments` given to SQL that has no statement to bind them to.
    static func checkNoArguments(_ arguments: StatementArguments, sql: String) throws {
        switch arguments.storage {
        case .positional(let values):
            throw StatementError.argumentCountMismatch(expected: 0, given: values.count, sql: sql)
        case .named(let values):
            throw StatementError.unusedNamedArgument(name: values.keys.sorted().first ?? "", sql: sql)
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
}
