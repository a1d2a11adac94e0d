// The layers below the facade are part of the one import an app needs: `import EncryptedSQLite`
// brings the connection API, cipher formats, migrations and key configuration with it.
@_exported import CipherFormats
@_exported import DatabaseMigrations
@_exported import KeyConfiguration
@_exported import SQLCipherConnection
