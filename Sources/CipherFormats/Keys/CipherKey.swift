import SQLCipherConnection

/// Key material together with the cipher settings of the files it opens: the only value a
/// connection can be keyed with (see `Connection.init(path:access:create:key:busyTimeout:)`).
///
/// A key's bytes and its settings never travel apart: a handle keyed with the bytes alone would
/// get the engine's default settings and fail its first read on a file written with any other
/// (SQLite error 26). ``KeyMaterial`` itself cannot key a connection.
///
/// ```swift
/// let key = CipherKey(material: try .passphrase("…"), settings: CipherSettings(pageSize: 4096))
/// let connection = try Connection(path: "app.sqlite", access: .readOnly, key: key, busyTimeout: .seconds(5))
/// ```
package struct CipherKey: SQLCipherKey, Sendable {
    /// The secret: a passphrase, a raw key, or a raw key plus salt derived for one file.
    package let material: KeyMaterial
    /// The settings of the files this key opens (`.engineDefault`: the linked engine's own).
    package let settings: CipherSettings
    /// The statements that apply `settings` right after the key, resolved on the linked engine.
    package let keySetup: [String]

    /// `material` with the settings of the files it opens.
    package init(material: KeyMaterial, settings: CipherSettings) {
        self.material = material
        self.settings = settings
        keySetup = SQLCipherEngine.linked.settingStatements(settings, schema: nil)
    }

    /// A key for the engine's own defaults that does not ask the linked engine for its setup
    /// statements: for the probe connections that find out which engine is linked.
    init(probing material: KeyMaterial) {
        self.material = material
        settings = .engineDefault
        keySetup = []
    }

    /// The same settings with other material (a raw key derived from this one for a file).
    package func with(_ material: KeyMaterial) -> CipherKey {
        CipherKey(material: material, settings: settings, keySetup: keySetup)
    }

    private init(material: KeyMaterial, settings: CipherSettings, keySetup: [String]) {
        self.material = material
        self.settings = settings
        self.keySetup = keySetup
    }

    /// Lends the material's bytes in the form `sqlite3_key` takes.
    package func withSQLCipherBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try material.withSQLCipherBytes(body)
    }

    /// The statements that apply `settings` to the attached schema `schema`.
    package func keySetup(schema: String) -> [String] {
        SQLCipherEngine.linked.settingStatements(settings, schema: schema)
    }
}
