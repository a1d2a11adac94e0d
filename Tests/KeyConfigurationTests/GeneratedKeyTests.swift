import EncryptedSQLite
import Foundation
import Testing
import TestSupport

@Suite("Making a key (GeneratedKey, Keys file editing)")
struct GeneratedKeyTests {
    let directory = TemporaryDirectory("newkey")

    /// A Keys file with comments, blank lines, a pattern entry, quoting and an indentless list.
    static func keysText(oldKeyFile: String) -> String {
        """
        # Production keys. Keep this comment.
        databases:
          # the main app
          - path: app.sqlite            # relative to this file
            keys:
              - id: "2024-01"
                file: \(oldKeyFile)   # the first key
                format: hex
                created: 2024-01-10

              # a comment after the last key stays after it
          - path: "tenants/*.sqlite"
            keys:
            - id: 'old'
              passphrase: "a passphrase: with a colon"
        # trailing comment
        """
    }

    func makeFiles() throws -> (keys: String, oldKey: String, hex: String) {
        let hex = TestKeys.hex()
        let oldKey = TestKeys.writeKeyFile(hex + "\n", in: directory, name: "old.key")
        let keys = directory.file("Keys")
        _ = FileManager.default.createFile(atPath: keys, contents: Data(Self.keysText(oldKeyFile: "old.key").utf8), attributes: [.posixPermissions: 0o600])
        chmod(keys, 0o700)   // not 0600, to see it kept; no group or other bits: the file holds key material
        return (keys, oldKey, hex)
    }

    /// The lines of `new` that match the lines of `old` in order (a subsequence); when the edit
    /// only added lines, this is all of `old`.
    func matchedInOrder(_ new: String, old: String) -> [String] {
        let oldLines = old.components(separatedBy: "\n")
        var matched: [String] = []
        for line in new.components(separatedBy: "\n") where matched.count < oldLines.count && line == oldLines[matched.count] {
            matched.append(line)
        }
        return matched
    }

    @Test("a new key: 32 random bytes in a new 0600 file, appended as the current key, comments and layout kept, reload gives the old entries plus the new key, and it rotates a database")
    func newKey() throws {
        let (keys, _, hex) = try makeFiles()
        let before = try String(contentsOfFile: keys, encoding: .utf8)
        let loadedBefore = try KeysFile.load(path: keys)
        let database = directory.file("app.sqlite")
        try Fixture.createWithShell(at: database, key: .hex(hex), rows: 30)
        let digest = try Fixture.digest(of: database, with: try loadedBefore.keyList(forDatabase: database))

        let key = try GeneratedKey.create(keysFile: keys, databases: ["app.sqlite"], id: "2026-11")
        #expect(key.keyFile == directory.file("2026-11.key"))
        let keyFile = try #require(key.keyFile)
        #expect(FileSystemProbe.mode(of: keyFile) == 0o600)
        #expect(FileSystemProbe.mode(of: keys) == 0o700, "the Keys file keeps its mode")
        let material = try #require(TestFiles.contents(keyFile))
        #expect(material.count == 32)
        #expect(Set(material).count > 8, "random bytes, not a constant")

        let after = try String(contentsOfFile: keys, encoding: .utf8)
        #expect(matchedInOrder(after, old: before) == before.components(separatedBy: "\n"), "every old line kept, in order")
        #expect(after.components(separatedBy: "\n").count == before.components(separatedBy: "\n").count + 4, "only the four lines of the new key added")
        #expect(after.contains("""
                    created: 2024-01-10
                  - id: "2026-11"
                    file: "2026-11.key"
                    format: binary
                    created: \(key.created ?? "?")

                  # a comment after the last key stays after it
            """))
        let reloaded = try KeysFile.load(path: keys)
        #expect(reloaded.entries.map(\.configuredPath) == loadedBefore.entries.map(\.configuredPath))
        #expect(reloaded.entries[1].keys.map(\.description) == loadedBefore.entries[1].keys.map(\.description))
        #expect(reloaded.entries[0].keys.map(\.id) == ["2024-01", "2026-11"])
        #expect(reloaded.entries[0].keys.last?.created != nil)

        // The new key is current: a rotation moves the database onto it, content intact.
        let list = try reloaded.keyList(forDatabase: database)
        #expect(list.currentID == "2026-11")
        let opened = try EncryptedDatabase(path: database, keys: list)
        #expect(opened.report.rotated)
        #expect(try Fixture.digest(of: database, with: try KeyList(database: database, keys: [reloaded.entries[0].keys[1]])) == digest)
    }

    @Test("an indentless pattern entry, hex format, no date: appended under the pattern only")
    func patternEntry() throws {
        let (keys, _, _) = try makeFiles()
        let key = try GeneratedKey.create(keysFile: keys, databases: ["tenants/*.sqlite"], id: "t2", format: .hex, created: nil)
        let text = try String(contentsOfFile: keys, encoding: .utf8)
        #expect(text.contains("""
                - id: 'old'
                  passphrase: "a passphrase: with a colon"
                - id: "t2"
                  file: "t2.key"
                  format: hex
            # trailing comment
            """))
        let keyFile = try #require(key.keyFile)
        let material = try #require(TestFiles.contents(keyFile))
        #expect(material.count == 65 && material.last == UInt8(ascii: "\n"))
        let reloaded = try KeysFile.load(path: keys)
        #expect(reloaded.entries[1].keys.map(\.id) == ["old", "t2"])
        _ = try reloaded.keyList(forDatabase: directory.file("tenants/a.sqlite"))  // the material loads
    }

    @Test("a Keys file the trust rules refuse (readable and writable by others) is not edited, and no key file is made")
    func untrustedKeysFile() throws {
        let (keys, _, _) = try makeFiles()
        chmod(keys, 0o666)
        let before = try String(contentsOfFile: keys, encoding: .utf8)
        #expect(throws: KeyMakingError.self) { try GeneratedKey.create(keysFile: keys, databases: ["app.sqlite"], id: "untrusted") }
        #expect(try String(contentsOfFile: keys, encoding: .utf8) == before)
        #expect(!FileManager.default.fileExists(atPath: directory.file("untrusted.key")))
    }

    @Test("refusals change nothing: a taken id, an existing key file, an unknown entry, a flow-style list")
    func refusals() throws {
        let (keys, _, _) = try makeFiles()
        let before = try Data(contentsOf: URL(fileURLWithPath: keys))
        func expectUnchanged(_ comment: Comment) throws {
            #expect(try Data(contentsOf: URL(fileURLWithPath: keys)) == before, comment)
        }
        #expect(throws: KeyMakingError.self) { try GeneratedKey.create(keysFile: keys, databases: ["app.sqlite"], id: "2024-01") }
        #expect(!FileManager.default.fileExists(atPath: directory.file("2024-01.key")))
        try expectUnchanged("taken id")

        _ = FileManager.default.createFile(atPath: directory.file("taken.key"), contents: Data("keep me".utf8))
        #expect(throws: KeyMakingError.keyFileExists(path: directory.file("taken.key"))) {
            try GeneratedKey.create(keysFile: keys, databases: ["app.sqlite"], id: "x", keyFile: directory.file("taken.key"))
        }
        #expect(TestFiles.contents(directory.file("taken.key")) == Data("keep me".utf8))
        try expectUnchanged("existing key file")

        #expect(throws: KeyMakingError.self) { try GeneratedKey.create(keysFile: keys, databases: ["other.sqlite"], id: "y") }
        #expect(!FileManager.default.fileExists(atPath: directory.file("y.key")))
        try expectUnchanged("unknown entry")

        let flow = directory.file("FlowKeys")
        let flowText = "databases:\n  - path: a.sqlite\n    keys: [{id: a, passphrase: x}]\n"
        _ = FileManager.default.createFile(atPath: flow, contents: Data(flowText.utf8))
        #expect(throws: KeyMakingError.self) { try GeneratedKey.create(keysFile: flow, databases: ["a.sqlite"], id: "z") }
        #expect(TestFiles.contents(flow) == Data(flowText.utf8))
        #expect(!FileManager.default.fileExists(atPath: directory.file("z.key")))
        #expect(directory.listing().allSatisfy { !$0.hasPrefix(".") }, "no temporary left: \(directory.listing())")
    }

    @Test("the edit keeps CRLF line endings and a file without a final newline")
    func lineEndings() throws {
        let crlf = directory.file("Keys")
        _ = FileManager.default.createFile(atPath: crlf, contents: Data("databases:\r\n  - path: a.sqlite\r\n    keys:\r\n      - id: a\r\n        passphrase: x".utf8), attributes: [.posixPermissions: 0o600])
        _ = try GeneratedKey.create(keysFile: crlf, databases: ["a.sqlite"], id: "b")
        let text = try String(contentsOfFile: crlf, encoding: .utf8)
        #expect(text.hasPrefix("databases:\r\n  - path: a.sqlite\r\n    keys:\r\n      - id: a\r\n        passphrase: x\r\n      - id: \"b\"\r\n        file: \"b.key\"\r\n"))
        #expect(try KeysFile.load(path: crlf).entries[0].keys.map(\.id) == ["a", "b"])
    }
}
