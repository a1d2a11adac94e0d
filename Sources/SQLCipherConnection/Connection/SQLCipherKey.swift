/// Key bytes in the form `sqlite3_key` takes, lent to the connection for one call.
///
/// The cipher layer's `KeyMaterial` is the one implementation: it keeps the bytes in a buffer
/// that is zeroed when released. The connection API never keeps a copy, never puts key bytes in
/// SQL text, and never prints them.
package protocol SQLCipherKey: Sendable {
    /// Lends the key's bytes, exactly as `sqlite3_key` and `ATTACH … KEY ?` take them.
    func withSQLCipherBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result
}
