import ArgumentParser
import EncryptedSQLite
import Foundation

/// `rekey keys rewrap`: master-key rotation, one durable edit of the Keys file.
struct RewrapCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rewrap",
        abstract: "Rotate the master key: rewrap every wrapped data key of the Keys file to one key-encryption key, touching no database.",
        discussion: """
            Every wrapped_key is unwrapped with the key-encryption key (KEK) it names and wrapped \\
            again with the target KEK: the last one of key_encryption_keys (add a token's key \\
            there first), the one --to names, or a new random KEK that --new-kek makes in a new \\
            file (mode 0600) and appends. The old values are not kept, so the old KEK can be \\
            retired at once (check with `rekey keys retire-check --kek <id>`). The Keys file is \\
            edited in place (its comments and layout stay), checked, and replaced durably; the \\
            data keys, and so the databases, do not change. Exit codes: \\(ExitStatus.documentation)
            """)

    @Option(help: ArgumentHelp("Rewrap to this listed key-encryption key (default: the last one).", valueName: "id"))
    var to: String?

    @Option(name: .customLong("new-kek"), help: ArgumentHelp("Make a new random key-encryption key with this id in a new file and rewrap to it.", valueName: "id"))
    var newKEK: String?

    @Option(name: .customLong("kek-file"), help: ArgumentHelp("The new key-encryption key's file (default: <id>.key beside the Keys file); it must not exist.", valueName: "path"))
    var kekFile: String?

    @Flag(help: "Write no created: date on a new key-encryption key.")
    var noCreated = false

    @Flag(help: "Print one JSON document instead of a line of text.")
    var json = false

    @OptionGroup var common: CommonOptions

    func validate() throws {
        if to != nil && newKEK != nil { throw ValidationError("give --to <listed id> or --new-kek <new id>, not both") }
        if kekFile != nil && newKEK == nil { throw ValidationError("--kek-file names the file of a new key-encryption key: give --new-kek <id> too") }
    }

    func run() throws {
        common.prepare()
        let rotation: MasterKeyRotation
        do {
            rotation = try MasterKeyRotation.rewrap(
                keysFile: common.keysPath, to: to, newKeyEncryptionKey: newKEK.map { .init(id: $0, file: kekFile) }, created: noCreated ? nil : Date())
        } catch {
            printError(error.description)
            throw ExitCode(ExitStatus(error).code)
        }
        if json {
            printJSON(rotation)
        } else {
            let from = rotation.previousKeyEncryptionKeyIDs.isEmpty ? "" : " (from \(rotation.previousKeyEncryptionKeyIDs.joined(separator: ", ")))"
            let made = rotation.newKeyEncryptionKeyFile.map { "new key-encryption key in \($0) (mode 0600); " } ?? ""
            Swift.print("\(rotation.keysFile): \(made)\(rotation.rewrapped) data key(s) rewrapped to \"\(rotation.keyEncryptionKeyID)\"\(from), \(rotation.alreadyCurrent) already on it; no database changed")
        }
    }
}
