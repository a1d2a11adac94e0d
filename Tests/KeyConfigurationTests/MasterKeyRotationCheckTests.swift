import DurableFiles
import EncryptedSQLite
import Foundation
@testable import KeyConfiguration
import Testing
import TestSupport

/// The check a master-key rotation makes of its own edit (step 4 of
/// ``MasterKeyRotation/rewrap(keysFile:to:newKeyEncryptionKey:environment:created:)``): a faulty
/// text rewrite, injected through the `alteringEditedText` seam, is refused with
/// ``KeyMakingError/notEdited(keysFile:problem:)`` naming the key id, and nothing on disk changes.
@Suite("Master-key rotation: a faulty edit of the Keys file is refused before anything is written")
struct MasterKeyRotationCheckTests {
    /// A faulty rewrite: its name, the key id the refusal must name, and the edit, given the
    /// rewritten text and the values before (the `wrapped_key:` texts of `d1` and `d2`, in order).
    struct FaultyEdit: CustomTestStringConvertible, Sendable {
        let name: String
        let namedKeyID: String
        let edit: @Sendable (_ text: String, _ oldValues: [String]) -> String

        var testDescription: String { name }

        static let all: [FaultyEdit] = [
            FaultyEdit(name: "d1's new value replaced by d2's", namedKeyID: "d1") { text, _ in
                let new = wrappedValues(in: text)
                return text.replacingOccurrences(of: new[0], with: new[1])
            },
            FaultyEdit(name: "d2's new value truncated by 8 characters", namedKeyID: "d2") { text, _ in
                let new = wrappedValues(in: text)
                return text.replacingOccurrences(of: new[1], with: String(new[1].dropLast(8)))
            },
            FaultyEdit(name: "d2's id changed", namedKeyID: "d2") { text, _ in
                text.replacingOccurrences(of: "- id: d2\n", with: "- id: d2-edited\n")
            },
            FaultyEdit(name: "d1's new value is its old one, wrapped under the old KEK, labelled with the new KEK", namedKeyID: "d1") { text, old in
                text.replacingOccurrences(of: wrappedValues(in: text)[0], with: old[0])
            },
            FaultyEdit(name: "d2 left as it was (old KEK, old value)", namedKeyID: "d2") { text, old in
                let new = wrappedValues(in: text)
                let lines = text.components(separatedBy: "\n")
                let at = lines.firstIndex { $0.contains(new[1]) }!
                var edited = lines
                let by = edited[at - 1].range(of: "wrapped_by: ")!
                edited[at - 1] = edited[at - 1][..<by.upperBound] + "kek-1"
                edited[at] = edited[at].replacingOccurrences(of: new[1], with: old[1])
                return edited.joined(separator: "\n")
            },
        ]
    }

    /// The `wrapped_key:` values of `text`, in order (without quotes).
    static func wrappedValues(in text: String) -> [String] {
        text.components(separatedBy: "\n").compactMap { line in
            guard let range = line.range(of: "wrapped_key: ") else { return nil }
            return line[range.upperBound...].trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
        }
    }

    /// A folder with KEK `kek-1` (a key file) and a Keys file whose two databases each have a
    /// data key wrapped by it: `d1` (app.sqlite) and `d2` (other.sqlite).
    struct Setup {
        let folder = TemporaryDirectory("rewrap-check")
        let secrets: [String]
        let oldValues: [String]
        var keysFile: String { folder.file("Keys") }

        init() throws {
            let kekBytes = (0..<32).map { _ in UInt8.random(in: 0...255) }
            _ = FileManager.default.createFile(atPath: folder.file("kek-1.key"), contents: Data(kekBytes), attributes: [.posixPermissions: 0o600])
            let keks = KeyEncryptionKeyList([LocalKeyEncryptionKey(id: "kek-1", key: try DataKey(copying: kekBytes))])
            let dataKeys = [DataKey.random(), DataKey.random()]
            let values = try zip(["d1", "d2"], dataKeys).map { id, key in try keks.wrap(key, dataKeyID: id) }
            oldValues = values.map(\.text)
            func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
            secrets = [hex(kekBytes), Data(kekBytes).base64EncodedString()]
                + dataKeys.flatMap { key in key.withUnsafeBytes { [hex(Array($0)), Data(Array($0)).base64EncodedString()] } }
            let text = """
                # master keys
                key_encryption_keys:
                  - id: kek-1
                    file: kek-1.key
                    format: binary
                databases:
                  - path: app.sqlite
                    keys:
                      - id: d1
                        wrapped_by: kek-1
                        wrapped_key: "\(values[0].text)"
                  - path: other.sqlite
                    keys:
                      - id: d2
                        wrapped_by: kek-1
                        wrapped_key: "\(values[1].text)"

                """
            _ = FileManager.default.createFile(atPath: keysFile, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        }
    }

    @Test("control: with no faulty edit the same rewrap succeeds and both values change")
    func control() throws {
        let setup = try Setup()
        var bySpans: Bool?
        let rotation = try MasterKeyRotation.rewrap(
            keysFile: setup.keysFile, to: nil, newKeyEncryptionKey: .init(id: "kek-2"), environment: nil, created: nil, files: .system,
            checked: { bySpans = $0 })
        #expect(rotation.rewrapped == 2)
        #expect(bySpans == true, "the edit of the usual layout is checked by its changed spans, without loading the whole text again")
        let values = Self.wrappedValues(in: try String(contentsOfFile: setup.keysFile, encoding: .utf8))
        #expect(values.count == 2 && Set(values).isDisjoint(with: setup.oldValues))
    }

    @Test("a faulty rewrite is refused: notEdited naming the key id, no key bytes in the message, the Keys file byte-for-byte as before, no temporary or new KEK file left",
          arguments: FaultyEdit.all)
    func faultyEditRefused(_ fault: FaultyEdit) throws {
        let setup = try Setup()
        let before = try Data(contentsOf: URL(fileURLWithPath: setup.keysFile))
        let listing = setup.folder.listing().sorted()
        var rewritten = ""
        var altered = ""
        var thrown: KeyMakingError?
        var bySpans: Bool?
        do {
            _ = try MasterKeyRotation.rewrap(
                keysFile: setup.keysFile, to: nil, newKeyEncryptionKey: .init(id: "kek-2"), environment: nil, created: nil, files: .system,
                alteringEditedText: { text in
                    rewritten = text
                    altered = fault.edit(text, setup.oldValues)
                    return altered
                }, checked: { bySpans = $0 })
        } catch {
            thrown = error
        }
        #expect(altered != rewritten && !altered.isEmpty, "the faulty edit must change the rewritten text")
        // The check of the changed spans refuses it too: the whole text is loaded only to name the fault.
        #expect(bySpans == false, "\(fault.name): the check of the changed spans let the faulty edit through")
        let error = try #require(thrown, "\(fault.name): the rewrap wrote a faulty Keys file")
        guard case .notEdited(let keysFile, let problem) = error else {
            Issue.record("\(fault.name): expected notEdited, got \(error)")
            return
        }
        print("\(fault.name): \(problem)")
        #expect(keysFile == setup.keysFile)
        #expect(problem.contains("\"\(fault.namedKeyID)\""), "\(fault.name): the refusal does not name key \(fault.namedKeyID): \(problem)")
        #expect(problem.contains("nothing was changed"), "\(problem)")
        // No key material: not the KEK's or a data key's bytes, nor a wrapped value, old or new.
        let message = error.description
        let values = Self.wrappedValues(in: rewritten) + setup.oldValues
        for secret in setup.secrets + values {
            #expect(!message.contains(secret), "\(fault.name): key material in the message: \(message)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: setup.keysFile)) == before, "the Keys file changed")
        #expect(setup.folder.listing().sorted() == listing, "files left: \(setup.folder.listing())")
    }

    @Test("other layouts: quoted, commented, flow and indentless keys, CRLF: each edit checked (by its spans or, where they cannot tell, by loading all), and the file reloads with every value unwrapping to the data key it held; an alias shared by two keys and an unlisted KEK are refused",
          arguments: [false, true])
    func otherLayouts(crlf: Bool) throws {
        let folder = TemporaryDirectory("rewrap-layouts")
        let kekBytes = (0..<32).map { _ in UInt8.random(in: 0...255) }
        _ = FileManager.default.createFile(atPath: folder.file("kek-1.key"), contents: Data(kekBytes), attributes: [.posixPermissions: 0o600])
        let kek = LocalKeyEncryptionKey(id: "kek-1", key: try DataKey(copying: kekBytes))
        let keks = KeyEncryptionKeyList([kek])
        let dataKeys = (0..<5).map { _ in DataKey.random() }
        let ids = ["a1", "b1", "c1", "d1", "e1"]
        let values = try zip(ids, dataKeys).map { id, key in try keks.wrap(key, dataKeyID: id).text }
        let files: [(name: String, text: String, spans: Bool)] = [
            ("quoted, commented, a second key", """
                # fleet
                key_encryption_keys:
                  - id: "kek-1"   # the first
                    file: 'kek-1.key'
                    format: binary

                  # more KEKs go here
                databases:
                  - path: "a.sqlite"
                    keys:
                      - id: a1
                        wrapped_by: "kek-1"    # old
                        wrapped_key: '\(values[0])'   # value
                      - id: b1
                        wrapped_by: 'kek-1'
                        wrapped_key: \(values[1])
                  - path: c.sqlite
                    keys: [{id: c1, wrapped_by: kek-1, wrapped_key: "\(values[2])"}]
                  - path: d.sqlite
                    keys:
                    - id: d1
                      wrapped_by:   kek-1
                      wrapped_key:    "\(values[3])"
                  - path: e.sqlite
                    keys:
                      - {id: e1, wrapped_by: kek-1, wrapped_key: \(values[4])}
                """, false),
            ("no KEK list", """
                databases:
                  - path: a.sqlite
                    keys:
                      - id: a1
                        wrapped_by: kek-1
                        wrapped_key: \(values[0])

                """, false),
            ("an alias", """
                key_encryption_keys:
                  - id: kek-1
                    file: kek-1.key
                    format: binary
                databases:
                  - path: a.sqlite
                    keys:
                      - id: a1
                        wrapped_by: &k kek-1
                        wrapped_key: \(values[0])
                      - id: b1
                        wrapped_by: *k
                        wrapped_key: \(values[1])
                """, false),
        ]
        for file in files {
            let keysFile = folder.file("Keys-\(files.firstIndex { $0.name == file.name }!)")
            let text = crlf ? file.text.replacingOccurrences(of: "\n", with: "\r\n") : file.text
            _ = FileManager.default.createFile(atPath: keysFile, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
            // "no KEK list" names kek-1 nowhere: it is given as an external KEK by loading through a list that has it.
            if file.name == "no KEK list" {
                #expect(throws: KeyMakingError.self) { try MasterKeyRotation.rewrap(keysFile: keysFile, newKeyEncryptionKey: .init(id: "kek-new"), created: nil) }
                continue
            }
            var bySpans: Bool?
            let rotation: MasterKeyRotation
            do {
                rotation = try MasterKeyRotation.rewrap(
                    keysFile: keysFile, to: nil, newKeyEncryptionKey: .init(id: "kek-2-\(file.name.count)", file: folder.file("kek-2-\(file.name.count).key")),
                    environment: nil, created: nil, files: .system, checked: { bySpans = $0 })
            } catch {
                // An alias shares one value between two keys: that edit is refused, and nothing changes.
                #expect(file.name == "an alias", "\(file.name): \(error)")
                #expect(try String(contentsOfFile: keysFile, encoding: .utf8) == text)
                continue
            }
            #expect(bySpans != nil, "\(file.name)")
            let reloaded = try KeysFile.load(path: keysFile)
            var unwrapped = 0
            for entry in reloaded.entries {
                for key in entry.keys {
                    guard case .wrapped(let value) = key.source, let index = ids.firstIndex(of: key.id) else { continue }
                    #expect(value.keyEncryptionKeyID == rotation.keyEncryptionKeyID)
                    let dataKey = try reloaded.keyEncryptionKeys.unwrap(value, dataKeyID: key.id, database: entry.configuredPath)
                    #expect(dataKey.bytes.isEqual(to: dataKeys[index].bytes), "\(file.name): \(key.id)")
                    unwrapped += 1
                }
            }
            #expect(unwrapped == rotation.rewrapped && rotation.rewrapped > 0, "\(file.name)")
            let after = try String(contentsOfFile: keysFile, encoding: .utf8)
            #expect(after.contains("# fleet") == text.contains("# fleet") && (crlf ? !after.replacingOccurrences(of: "\r\n", with: "").contains("\n") : !after.contains("\r")),
                    "\(file.name): comments and line endings kept")
        }
    }
}
