import ArgumentParser
import EncryptedSQLite
import Testing
@testable import rekey

/// The `rekey` command line, parsed in this process (`parseAsRoot`, as swift-argument-parser's own
/// tests do): which subcommand and values each line gives, and which lines validation refuses and
/// with what message. No binary is started; the end-to-end tests run the product.
@Suite("rekey's command line, parsed in-process")
struct RekeyParsingTests {
    /// Parses `arguments` as the binary would, or returns the message it would print.
    static func parse(_ arguments: [String]) -> Result<any ParsableCommand, ParseFailure> {
        do {
            return .success(try RekeyCommand.parseAsRoot(arguments))
        } catch {
            return .failure(ParseFailure(message: RekeyCommand.parseErrorMessage(error, arguments: arguments), code: RekeyCommand.exitCode(for: error).rawValue))
        }
    }

    struct ParseFailure: Error {
        let message: String
        let code: Int32
    }

    static func command<T: ParsableCommand>(_ arguments: [String], as type: T.Type) throws -> T {
        let parsed = try parse(arguments).get()
        return try #require(parsed as? T, "\(arguments) parsed as \(Swift.type(of: parsed)), not \(T.self)")
    }

    static func failure(_ arguments: [String]) throws -> ParseFailure {
        switch parse(arguments) {
        case .success(let command): throw ParseFailure(message: "\(arguments) parsed as \(type(of: command)), expected a refusal", code: 0)
        case .failure(let failure): return failure
        }
    }

    @Test("without a subcommand, rekey rotates: --db, --all, --jobs, --check, --json, --verify, --strategy, --threads, --keys, --busy-timeout")
    func defaultSubcommandIsRotate() throws {
        let one = try Self.command(["--db", "app.sqlite"], as: Rotate.self)
        #expect(one.selection.databases == ["app.sqlite"] && !one.selection.all)
        #expect(one.jobs == 2 && !one.check && !one.json)
        #expect(one.verify == OpenOptions().verification && one.strategy == OpenOptions().rotationStrategy)
        #expect(one.common.keysFile == nil && one.common.busyTimeout == 5)

        let fleet = try Self.command(
            ["rotate", "--all", "--jobs", "4", "--check", "--json", "--verify", "integrityCheck", "--strategy", "engineRekey",
             "--threads", "3", "--keys", "/srv/Keys", "--busy-timeout", "2.5", "-v"],
            as: Rotate.self)
        #expect(fleet.selection.all && fleet.selection.databases.isEmpty)
        #expect(fleet.jobs == 4 && fleet.check && fleet.json && fleet.threads == 3)
        #expect(fleet.verify == .integrityCheck && fleet.strategy == .engineRekey)
        #expect(fleet.common.keysPath == "/srv/Keys" && fleet.common.timeout == .milliseconds(2500) && fleet.common.verbose)

        let several = try Self.command(["--db", "a.sqlite", "--db", "b.sqlite"], as: Rotate.self)
        #expect(several.selection.databases == ["a.sqlite", "b.sqlite"], "a repeated --db adds a database, it does not replace the first")
    }

    @Test("each subcommand parses to its command with its values")
    func subcommands() throws {
        let status = try Self.command(["status", "--all", "--json"], as: Status.self)
        #expect(status.selection.all && status.json)
        let backup = try Self.command(["backup", "--db", "app.sqlite", "--to", "copy.sqlite"], as: Backup.self)
        #expect(backup.database == "app.sqlite" && backup.target == "copy.sqlite")
        let decrypt = try Self.command(["decrypt", "--db", "app.sqlite", "--out", "plain.sqlite", "--confirm-plaintext"], as: Decrypt.self)
        #expect(decrypt.database == "app.sqlite" && decrypt.out == "plain.sqlite" && decrypt.confirmPlaintext)
        let new = try Self.command(["keys", "new", "--for", "app.sqlite", "--for", "backups/*.sqlite", "--id", "2026-11", "--format", "hex"], as: NewKeyCommand.self)
        #expect(new.databases == ["app.sqlite", "backups/*.sqlite"] && new.id == "2026-11" && new.format == .hex)
        let retire = try Self.command(["keys", "retire-check", "--key", "2024-01", "--all", "--backups", "/b/*.sqlite"], as: RetireCheck.self)
        #expect(retire.keyID == "2024-01" && retire.selection.all && retire.backups == ["/b/*.sqlite"])
        _ = try Self.command(["keys", "rewrap", "--json"], as: RewrapCommand.self)
    }

    @Test("validation refuses each bad line with its message and exit code 64, before any file is read")
    func refusals() throws {
        let cases: [(arguments: [String], message: String)] = [
            (["rotate"], "give at least one database with --db <path>, or --all"),
            (["--db", "a.sqlite", "--jobs", "0"], "--jobs must be between"),
            (["--db", "a.sqlite", "--threads", "0"], "--threads must be between"),
            (["--db", "a.sqlite", "--busy-timeout", "1000000"], "--busy-timeout must be between"),
            (["decrypt", "--db", "a.sqlite", "--out", "p.sqlite"], "add --confirm-plaintext"),
            (["keys", "new"], "name the Keys file entry with --for"),
            (["keys", "new", "--for", "a.sqlite", "--wrapped", "--key-file", "k.key"], "--wrapped makes no key file"),
            (["keys", "retire-check", "--all"], "give the key to retire with --key <id>"),
            (["keys", "retire-check", "--kek", "kek-1", "--all"], "--kek checks the Keys file only"),
        ]
        for (arguments, expected) in cases {
            let failure = try Self.failure(arguments)
            #expect(failure.message.contains(expected), "\(arguments): \(failure.message)")
            #expect(failure.code == 64, "\(arguments): exit code \(failure.code)")
        }
    }

    @Test("a key typed on the command line is refused as such, and neither it nor any other typed value is repeated")
    func keyOnTheCommandLine() throws {
        let secret = "x'2DD29CA851E7B56E4697B0E1F08507293D761A05CE4D1B628663F411A8086D99'"
        let refused = try Self.failure(["--db", "app.sqlite", "--key", secret])
        #expect(refused.message.contains("key material is not accepted on the command line"), "\(refused.message)")
        #expect(!refused.message.contains("2DD29CA8"), "the key must not be repeated: \(refused.message)")

        let unknown = try Self.failure(["--db", "app.sqlite", "--frobnicate", "hunter2"])
        #expect(unknown.message.contains("unrecognized argument"), "\(unknown.message)")
        #expect(!unknown.message.contains("hunter2") && !unknown.message.contains("frobnicate"), "\(unknown.message)")

        let badNumber = try Self.failure(["--db", "app.sqlite", "--jobs", "s3cr3t"])
        #expect(!badNumber.message.contains("s3cr3t"), "a value ArgumentParser cannot read must not be echoed: \(badNumber.message)")
        #expect(badNumber.message.contains("(not shown)"), "\(badNumber.message)")
    }

    @Test("--help is kept apart from running: the help of the root and of `keys` lists their subcommands and options")
    func help() {
        let root = RekeyCommand.helpMessage()
        for name in ["rotate", "status", "dump", "decrypt", "backup", "keys"] {
            #expect(root.contains(name), "rekey --help does not list \(name)")
        }
        let rotate = RekeyCommand.helpMessage(for: Rotate.self)
        for option in ["--db <path>", "--all", "--keys <path>", "--jobs <n>", "--check", "--json"] {
            #expect(rotate.contains(option), "rekey rotate --help does not list \(option)")
        }
        let keys = RekeyCommand.helpMessage(for: Keys.self)
        #expect(keys.contains("new") && keys.contains("rewrap") && keys.contains("retire-check"), "\(keys)")
        #expect(RekeyCommand.helpMessage(for: NewKeyCommand.self).contains("--for <path>"))
    }
}
