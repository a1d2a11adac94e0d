@testable import CipherFormats
import Foundation
import Testing
import TestSupport

/// A file the `sqlcipher` shell writes with some settings, and the page format the library should
/// read it with.
struct ShellFormatCase: CustomTestStringConvertible, Sendable {
    let label: String
    /// The shell's settings after the key (the engine's own defaults when empty).
    let pragmas: String
    let format: PageFormat
    let oldKind: SourceKind
    /// The reserve SQLite's header records (byte 20 of the plaintext page 1). SQLCipher sets it
    /// when the key is given, from the HMAC then in force: a file keyed with SQLCipher 4's defaults
    /// and then switched to HMAC-SHA256 records 80 while its pages use 48 (IV + 32, rounded).
    let headerReserve: Int
    var testDescription: String { "\(label), \(oldKind) → new key" }
}

/// A format with the 2.x knobs set.
private func legacyFormat(bigEndian: Bool, saltMask: UInt8 = 0x3a, hmacKeyIterations: Int = 2) -> PageFormat {
    var format = PageFormat.sqlcipher3(pageSize: 1024)
    format.keyDerivation.iterations = 4000
    format.hmacPageNumberBigEndian = bigEndian
    format.hmacSaltMask = saltMask
    format.hmacKeyIterations = hmacKeyIterations
    return format
}

private let sqlcipher4Cases: [ShellFormatCase] = {
    var sha256 = PageFormat.sqlcipher4(pageSize: 4096)
    sha256.hmac = .sha256
    return [
        ShellFormatCase(label: "SQLCipher 4 defaults", pragmas: "", format: .sqlcipher4(), oldKind: .passphrase, headerReserve: 80),
        ShellFormatCase(label: "SQLCipher 4 defaults", pragmas: "", format: .sqlcipher4(), oldKind: .hex, headerReserve: 80),
        ShellFormatCase(label: "4 KiB pages, HMAC-SHA256", pragmas: "PRAGMA cipher_page_size = 4096;\nPRAGMA cipher_hmac_algorithm = HMAC_SHA256;\n",
                        format: sha256, oldKind: .passphrase, headerReserve: 80),
    ]
}()

private let sqlcipher2Cases: [ShellFormatCase] = [
    ShellFormatCase(label: "SQLCipher 2.x, big-endian host", pragmas: "PRAGMA kdf_iter = 4000;\nPRAGMA cipher_hmac_pgno = be;\n",
                    format: legacyFormat(bigEndian: true), oldKind: .passphrase, headerReserve: 48),
    ShellFormatCase(label: "SQLCipher 2.0 beta", pragmas: "PRAGMA kdf_iter = 4000;\nPRAGMA fast_kdf_iter = 4000;\nPRAGMA cipher_hmac_salt_mask = \"x'00'\";\n",
                    format: legacyFormat(bigEndian: false, saltMask: 0, hmacKeyIterations: 4000), oldKind: .hex, headerReserve: 48),
]

@Suite("Page formats: the library's page layer on files SQLCipher's own shell writes")
struct PageFormatTests {
    @Test("the reserve is IV + HMAC rounded up to the AES block: 48 bytes for HMAC-SHA1 and -SHA256, 80 for HMAC-SHA512, 16 without HMAC")
    func reserve() {
        var format = PageFormat.sqlcipher3(pageSize: 1024)
        #expect(format.reserve == 48)
        format.hmac = .sha256
        #expect(format.reserve == 48)
        format.hmac = nil
        #expect(format.reserve == 16 && !format.supportsPageReencryption)
        #expect(PageFormat.sqlcipher4().reserve == 80)
        #expect(PageFormat.sqlcipher4().pageSize == 4096 && PageFormat.sqlcipher4().keyDerivation == .init(algorithm: .sha512, iterations: 256_000))
    }

    @Test("settings map to the page format they write: engine defaults to the linked engine's generation, generations and explicit settings to theirs")
    func settingsMapping() throws {
        let mapped = try #require(PageFormat(settings: CipherSettings(kdfIterations: 4000, pageSize: 4096)))
        var expected = SQLCipherEngine.linked.major >= 4 ? PageFormat.sqlcipher4(pageSize: 4096) : PageFormat.sqlcipher3(pageSize: 4096)
        expected.keyDerivation.iterations = 4000
        #expect(mapped == expected)
        #expect(PageFormat(settings: .engineDefault) == (SQLCipherEngine.linked.major >= 4 ? .sqlcipher4(pageSize: 4096) : .sqlcipher3(pageSize: 1024)))
        #expect(PageFormat(settings: CipherSettings(generation: .sqlcipher3)) == .sqlcipher3(pageSize: 1024))
        var bigEndian = PageFormat.sqlcipher3(pageSize: 1024)
        bigEndian.keyDerivation.iterations = 4000
        bigEndian.hmacPageNumberBigEndian = true
        #expect(PageFormat(settings: CipherSettings(generation: .sqlcipher2, hmacPageNumber: .bigEndian)) == bigEndian)
        #expect(PageFormat(settings: CipherSettings(useHMAC: false))?.supportsPageReencryption == false)
        #expect(PageFormat(settings: CipherSettings(pageSize: 1000)) == nil)
        #expect(PageFormat(settings: .engineDefault, engine: SQLCipherEngine(version: "unknown", major: 0, sqliteVersion: "unknown")) == nil)
    }

    @Test("SQLCipher 4 files: the page layer re-encrypts a file the 4.x shell wrote with its own defaults (or HMAC-SHA256), which the shell then opens with the new key and default settings only",
          .enabled(if: SQLCipherEngine.linked.major >= 4 && SQLCipherShell.majorVersion >= 4, "needs SQLCipher 4 (scripts/sqlcipher4-check.sh)"),
          arguments: sqlcipher4Cases)
    func sqlcipher4(_ scenario: ShellFormatCase) throws {
        try reencryptAndCheck(scenario)
    }

    @Test("SQLCipher 2.x files that 3.4.1 reads with cipher_hmac_pgno or cipher_hmac_salt_mask + fast_kdf_iter: the page layer authenticates and re-encrypts them, and the shell opens them with the new key",
          .enabled(if: SQLCipherEngine.linked.major == 3 && SQLCipherShell.majorVersion == 3, "SQLCipher 3.4.1 reads these with its deprecated pragmas"),
          arguments: sqlcipher2Cases)
    func sqlcipher2(_ scenario: ShellFormatCase) throws {
        try reencryptAndCheck(scenario)
    }

    /// Makes the file with the shell, re-encrypts it with the page layer, checks it with the shell.
    private func reencryptAndCheck(_ scenario: ShellFormatCase) throws {
        let directory = TemporaryDirectory("page-format")
        let path = directory.file("app.sqlite")
        let old = key(scenario.oldKind), new = key(.hex)
        let made = try shell(path, old, scenario, Fixture.sql(rows: 2000)
            + "\nCREATE TABLE blobs(id INTEGER PRIMARY KEY, b BLOB);\nWITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 200) INSERT INTO blobs(b) SELECT randomblob(5000) FROM n;")
        try #require(made.status == 0, "\(made.stderr)")

        var file = try Data(contentsOf: URL(fileURLWithPath: path))
        let size = scenario.format.pageSize
        try #require(file.count % size == 0 && file.count / size > 50)
        let salt = Array(file.prefix(PageFormat.saltSize))
        let oldKeys = try #require(PageKeys.derive(from: material(old), salt: salt, format: scenario.format))
        let newKeys = try #require(PageKeys.derive(from: material(new), salt: salt, format: scenario.format))

        // Every page authenticates with the format, and with no other byte order or HMAC digest.
        let cipher = try #require(PageCipher(keys: oldKeys, format: scenario.format))
        var other = scenario.format
        other.hmacPageNumberBigEndian.toggle()
        let otherOrder = try #require(PageCipher(keys: oldKeys, format: other))
        other = scenario.format
        other.hmac = scenario.format.hmac == .sha512 ? .sha256 : .sha512
        let otherKeys = try #require(PageKeys.derive(from: material(old), salt: salt, format: other))
        let otherDigest = try #require(PageCipher(keys: otherKeys, format: other))
        try file.withUnsafeBytes { bytes in
            for index in 0..<(bytes.count / size) {
                let page = UnsafeRawBufferPointer(rebasing: bytes[(index * size)..<((index + 1) * size)])
                let number = UInt32(index + 1)
                #expect(cipher.authenticates(page, number: number), "page \(number)")
                #expect(!otherOrder.authenticates(page, number: number), "page \(number) in the other byte order")
                #expect(!otherDigest.authenticates(page, number: number), "page \(number) with another HMAC")
            }
            // SQLite's header in the decrypted page 1 records a reserve at least the format's.
            var plaintext = [UInt8](repeating: 0, count: size)
            let decrypted = plaintext.withUnsafeMutableBytes { cipher.decrypt(UnsafeRawBufferPointer(rebasing: bytes[0..<size]), number: 1, into: $0) }
            try #require(decrypted)
            #expect(Array(plaintext.prefix(16)) == Array("SQLite format 3\0".utf8))
            #expect(Int(plaintext[20]) == scenario.headerReserve && scenario.format.reserve <= scenario.headerReserve)
        }

        let reencoder = try PageReencoder(from: oldKeys, to: newKeys, format: scenario.format, maximumPages: file.count / size)
        try file.withUnsafeMutableBytes { try reencoder.reencrypt($0, first: 1) }
        #expect(Array(file.prefix(PageFormat.saltSize)) == salt)
        try file.write(to: URL(fileURLWithPath: path))

        let checked = try shell(path, new, scenario, "PRAGMA integrity_check; SELECT count(*), sum(score) FROM people; SELECT count(*), sum(length(b)) FROM blobs; PRAGMA user_version; PRAGMA application_id;")
        #expect(checked.stdout.split(separator: "\n") == ["ok", "2000|1000500.0", "200|1000000", "42", "1234567"], "\(checked.stderr)")
        let refused = try shell(path, old, scenario, "SELECT count(*) FROM people;")
        #expect(refused.status != 0)
    }

    private func key(_ kind: SourceKind) -> ShellKey {
        kind == .hex ? .hex(TestKeys.hex()) : .passphrase(TestKeys.passphrase("format"))
    }

    private func material(_ key: ShellKey) throws -> KeyMaterial {
        switch key {
        case .passphrase(let text): return try KeyMaterial.passphrase(text)
        case .hex(let digits): return try KeyMaterial.rawKey(hex: digits)
        }
    }

    /// Runs `sql` in the shell keyed with `key` and the scenario's settings only: unlike
    /// ``ShellKey/pragma``, no `cipher_compatibility` pin, so the engine's own defaults apply.
    private func shell(_ path: String, _ key: ShellKey, _ scenario: ShellFormatCase, _ sql: String) throws -> ProcessResult {
        let keyLine: String
        switch key {
        case .passphrase(let text): keyLine = "PRAGMA key = '\(text.replacingOccurrences(of: "'", with: "''"))';"
        case .hex(let digits): keyLine = "PRAGMA key = \"x'\(digits)'\";"
        }
        // SQLCipher 4 answers `PRAGMA key` (and 3.4.1 the deprecated pragmas) with a row or notice.
        return try SQLCipherShell.run(path, key: nil, ".output /dev/null\n\(keyLine)\n\(scenario.pragmas).output stdout\n\(sql)")
    }
}
