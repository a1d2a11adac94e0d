extension Statement {
    /// Resets, binds `arguments` and runs the statement to completion, ignoring any rows.
    /// - Throws: ``StatementError`` or ``SQLiteError``.
    public func execute(_ arguments: StatementArguments = StatementArguments()) throws {
        try bind(arguments)
        while try step() {}
        reset()
    }

    /// Resets the statement, binds `values` (see ``bind(values:)``) and runs it to completion,
    /// ignoring any rows; then resets it again.
    /// - Throws: ``StatementError`` or ``SQLiteError``.
    @inlinable
    public func execute<each Value: DatabaseValueConvertible>(values: repeat each Value) throws {
        try run { try $0.bind(values: repeat each values) }
    }

    // Swift walks a parameter pack at run time, value by value through generic witnesses, which
    // costs more than SQLite's own bind. Statements with up to three parameters, the common case,
    // get overloads without a pack; they behave exactly like the pack version.

    /// ``execute(values:)`` for one value, without a parameter pack.
    /// - Throws: ``StatementError`` or ``SQLiteError``.
    @inlinable
    public func execute<A: DatabaseValueConvertible>(values a: A) throws {
        try run { try $0.bind(count: 1) { try $0.bindValue(a, at: 1) } }
    }

    /// ``execute(values:)-(Value)`` for two values, without a parameter pack.
    /// - Throws: ``StatementError`` or ``SQLiteError``.
    @inlinable
    public func execute<A: DatabaseValueConvertible, B: DatabaseValueConvertible>(values a: A, _ b: B) throws {
        try run { try $0.bind(count: 2) { try $0.bindValue(a, at: 1); try $0.bindValue(b, at: 2) } }
    }

    /// ``execute(values:)-(Value)`` for three values, without a parameter pack.
    /// - Throws: ``StatementError`` or ``SQLiteError``.
    @inlinable
    public func execute<A: DatabaseValueConvertible, B: DatabaseValueConvertible, C: DatabaseValueConvertible>(values a: A, _ b: B, _ c: C) throws {
        try run { try $0.bind(count: 3) { try $0.bindValue(a, at: 1); try $0.bindValue(b, at: 2); try $0.bindValue(c, at: 3) } }
    }

    /// Binds with `bindValues`, runs the statement to completion ignoring any rows, and resets it.
    @inlinable @inline(__always)
    func run(binding bindValues: (Statement) throws -> Void) throws {
        try bindValues(self)
        while try step() {}
        reset()
    }
}
