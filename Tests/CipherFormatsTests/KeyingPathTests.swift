import CipherFormats
import Foundation
import SQLCipherConnection
import Testing

/// A key's bytes and its cipher settings reach a SQLite handle together, through one place. The
/// reader pool once keyed its readers with the bytes alone (engine defaults for every other
/// setting), which made every pooled read of a file with other settings fail; these checks keep
/// a second keying path from appearing.
@Suite("One way to key a connection")
struct KeyingPathTests {
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources").path

    /// Each line of a Swift file under `Sources/` that matches `pattern`, outside `//` comments,
    /// as "relative/path.swift:line".
    static func lines(matching pattern: String, under folder: String = "") throws -> [String] {
        let regex = try NSRegularExpression(pattern: pattern)
        let root = sources + (folder.isEmpty ? "" : "/" + folder)
        var found: [String] = []
        let files = FileManager.default.enumerator(atPath: root)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }.sorted() ?? []
        for file in files {
            let text = try String(contentsOfFile: root + "/" + file, encoding: .utf8)
            for (number, line) in text.components(separatedBy: "\n").enumerated() {
                let code = line.components(separatedBy: "//").first ?? ""
                if regex.firstMatch(in: code, range: NSRange(code.startIndex..., in: code)) != nil {
                    found.append("\(folder.isEmpty ? "" : folder + "/")\(file):\(number + 1)")
                }
            }
        }
        return found
    }

    @Test("the top module opens a keyed connection in exactly one place, KeyedConnections.connect")
    func oneKeyingPlace() throws {
        let places = try Self.lines(matching: #"Connection\(path:.*\bkey:"#, under: "EncryptedSQLite")
        #expect(places.count == 1 && places.allSatisfy { $0.hasPrefix("EncryptedSQLite/Keying/KeyedConnections.swift:") },
                "keyed connections must open through KeyedConnections.connect(_:create:); found: \(places)")
        // ATTACH … KEY is keying too: it takes the same CipherKey.
        let attaches = try Self.lines(matching: #"\.attach\(path:"#, under: "EncryptedSQLite")
        #expect(!attaches.isEmpty)
        for place in attaches {
            let (file, line) = (String(place.split(separator: ":")[0]), Int(place.split(separator: ":")[1])!)
            let text = try String(contentsOfFile: Self.sources + "/" + file, encoding: .utf8).components(separatedBy: "\n")[line - 1]
            #expect(text.contains("cipherKey"), "\(place) attaches with something else than a resolved key's CipherKey: \(text)")
        }
    }

    @Test("the connection layer's keyed initializer is called only by the cipher layer's CipherKey initializer and the engine probe")
    func connectionLayerKeyedOnlyByCipherLayer() throws {
        let callers = try Self.lines(matching: #"sqlcipherKey:"#).filter { !$0.hasPrefix("SQLCipherConnection/") }
        let files = Set(callers.map { String($0.split(separator: ":")[0]) })
        #expect(files == ["CipherFormats/Settings/Connection+Cipher.swift", "CipherFormats/Settings/SQLCipherEngine.swift"], "\(callers)")
    }

    @Test("key material alone is not a key a connection takes; a CipherKey (material and settings) is")
    func materialAloneCannotKey() throws {
        let material = try KeyMaterial.rawKey(hex: String(repeating: "ab", count: 32))
        #expect(!((material as Any) is any SQLCipherKey))
        let key = CipherKey(material: material, settings: CipherSettings(pageSize: 2048))
        #expect(((key as Any) is any SQLCipherKey))
        #expect(key.keySetup.contains("PRAGMA cipher_page_size = 2048"))
    }
}
