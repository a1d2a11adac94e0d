/// A key in the form a connection is keyed with: its bytes, exactly as `sqlite3_key` takes them,
/// and the statements that apply the cipher settings of the file it opens. Both come together, so
/// no handle can be keyed with bytes and the engine's default settings by omission.
///
/// The cipher layer's `CipherKey` is the one implementation: it keeps the bytes in a buffer that
/// is zeroed when released. The connection API never keeps a copy, never puts key bytes in SQL
/// text, and never prints them.
package protocol SQLCipherKey: Sendable {
    /// Lends the key's bytes, exactly as `sqlite3_key` and `ATTACH … KEY ?` take them.
    func withSQLCipherBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result
    /// The statements that apply the key's cipher settings to the `main` schema, run right after
    /// `sqlite3_key` and before anything is read (empty for the engine's own defaults).
    var keySetup: [String] { get }
}
