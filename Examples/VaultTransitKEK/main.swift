import EncryptedSQLite
import Foundation

// Opens a database whose data key Vault wraps. The Keys file names the KEK as external:
//
//   key_encryption_keys:
//     - id: vault-2026
//       external: vault
//   databases:
//     - path: app.sqlite
//       keys:
//         - id: data-2026
//           wrapped_by: vault-2026
//           wrapped_key: "…"          # made by: rekey-like code calling keys.keyEncryptionKeys.wrap
//
// Run with VAULT_ADDR and VAULT_TOKEN set (compiled by every build; not run by the tests).
let environment = ProcessInfo.processInfo.environment
guard let address = environment["VAULT_ADDR"].flatMap(URL.init(string:)), let token = environment["VAULT_TOKEN"] else {
    print("set VAULT_ADDR and VAULT_TOKEN")
    exit(64)
}
let vault = VaultTransitKEK(id: "vault-2026", address: address, keyName: "app-kek", token: token)
let keysFile = try KeysFile.load(path: "Keys", externalKeyEncryptionKeys: ["vault": vault])

// A new data key for app.sqlite, wrapped by Vault: paste the printed value into the Keys file
// as wrapped_key: of a new key entry, then open (the open rotates the file to it).
if CommandLine.arguments.dropFirst().first == "new-data-key" {
    let wrapped = try keysFile.keyEncryptionKeys.wrap(DataKey.random(), dataKeyID: "data-2026", with: vault.id)
    print("wrapped_by: \(wrapped.keyEncryptionKeyID)\nwrapped_key: \"\(wrapped.text)\"")
    exit(0)
}
// Read again whenever another process rotates the file, so the service follows without a restart.
let database = try EncryptedDatabase(path: "app.sqlite", keyProvider: {
    try KeysFile.load(path: "Keys", externalKeyEncryptionKeys: ["vault": vault]).keyList(forDatabase: "app.sqlite")
})
print("opened with \(database.report.openedWithKeyID); rotated: \(database.report.rotated)")
