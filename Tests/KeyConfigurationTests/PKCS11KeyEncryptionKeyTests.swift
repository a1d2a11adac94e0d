import CipherFormats
import DurableFiles
import EncryptedSQLite
import Foundation
import KeyConfiguration
import Testing
import TestSupport

/// The PKCS#11 key-encryption key against a real token (SoftHSM2, tokens made by its own tools):
/// AES-GCM runs on the token, and every failure says which step and what to do, never the PIN.
@Suite("PKCS#11 key-encryption keys (SoftHSM2)", .enabled(if: SoftHSMToken.testsEnabled, "SoftHSM2 is not installed: apt-get install softhsm2 opensc (scripts/setup.sh does)"))
struct PKCS11KeyEncryptionKeyTests {
    let directory = TemporaryDirectory("pkcs11")
    let environment = [SoftHSMToken.pinVariable: SoftHSMToken.pin]

    func kek(id: String = "hsm", token: String = SoftHSMToken.mainToken, key: String = "kek-a", environment: [String: String]? = nil) throws -> PKCS11KeyEncryptionKey {
        _ = try SoftHSMToken.configuration()
        return try PKCS11KeyEncryptionKey(id: id, reference: SoftHSMToken.reference(token: token, key: key), environment: environment ?? self.environment)
    }

    static func bytes(_ key: DataKey) -> [UInt8] { key.withUnsafeBytes { Array($0) } }

    @Test("wrap and unwrap on the token: 60 bytes (IV, ciphertext, tag), a fresh IV each time, the same data key back")
    func roundTrip() throws {
        let kek = try kek()
        let dataKey = DataKey.random()
        let context = KeyWrappingContext(dataKeyID: "data-1", keyEncryptionKeyID: kek.id)
        let first = try kek.wrap(dataKey, context: context)
        let second = try kek.wrap(dataKey, context: context)
        #expect(first.count == 60 && second.count == 60)
        #expect(first.prefix(12) != second.prefix(12))
        #expect(Self.bytes(try kek.unwrap(first, context: context)) == Self.bytes(dataKey))
        #expect(Self.bytes(try kek.unwrap(second, context: context)) == Self.bytes(dataKey))
        // A second KEK object on the same key (a new session) unwraps it too.
        #expect(Self.bytes(try self.kek().unwrap(first, context: context)) == Self.bytes(dataKey))
    }

    @Test("the token's AES-GCM is the standard one: LocalKeyEncryptionKey on the same key bytes opens its values and the reverse")
    func sameLayoutAsLocal() throws {
        let token = try kek(id: "k", key: "imported")
        let local = LocalKeyEncryptionKey(id: "k", key: try DataKey(copying: SoftHSMToken.importedKey))
        let dataKey = DataKey.random()
        let context = KeyWrappingContext(dataKeyID: "data-1", keyEncryptionKeyID: "k")
        #expect(Self.bytes(try local.unwrap(try token.wrap(dataKey, context: context), context: context)) == Self.bytes(dataKey))
        #expect(Self.bytes(try token.unwrap(try local.wrap(dataKey, context: context), context: context)) == Self.bytes(dataKey))
    }

    @Test("a value altered anywhere, made for another key entry or KEK id, or by another key does not authenticate")
    func tampered() throws {
        let kek = try kek()
        let context = KeyWrappingContext(dataKeyID: "data-1", keyEncryptionKeyID: kek.id)
        let wrapped = try kek.wrap(DataKey.random(), context: context)
        for index in [0, 11, 12, 30, 43, 44, 59] {
            var altered = wrapped
            altered[index] ^= 0x01
            #expect(throws: KeyWrappingProblem.doesNotAuthenticate) { try kek.unwrap(altered, context: context) }
        }
        #expect(throws: KeyWrappingProblem.doesNotAuthenticate) {
            try kek.unwrap(wrapped, context: KeyWrappingContext(dataKeyID: "data-2", keyEncryptionKeyID: kek.id))
        }
        #expect(throws: KeyWrappingProblem.doesNotAuthenticate) {
            try kek.unwrap(wrapped, context: KeyWrappingContext(dataKeyID: "data-1", keyEncryptionKeyID: "other"))
        }
        #expect(throws: KeyWrappingProblem.doesNotAuthenticate) { try self.kek(key: "kek-b").unwrap(wrapped, context: context) }
        #expect(throws: KeyWrappingProblem.wrappedValueSize(bytes: 59)) { try kek.unwrap(Array(wrapped.dropLast()), context: context) }
    }

    @Test("one KEK shared by 8 threads: 400 wraps and unwraps, all correct")
    func threads() throws {
        let kek = try kek()
        let failures = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for round in 0..<25 {
                let dataKey = DataKey.random()
                let context = KeyWrappingContext(dataKeyID: "data-\(thread)-\(round)", keyEncryptionKeyID: kek.id)
                let ok = (try? kek.unwrap(try kek.wrap(dataKey, context: context), context: context)).map(Self.bytes) == Self.bytes(dataKey)
                if !ok { failures.withLock { $0 += 1 } }
            }
        }
        #expect(failures.withLock { $0 } == 0)
    }

    @Test("a database keyed by a data key wrapped under the token's KEK opens and keeps its rows; the shell opens it with the raw data key")
    func database() throws {
        let kek = try kek()
        let dataKey = DataKey.random()
        let wrapped = try KeyEncryptionKeyList([kek]).wrap(dataKey, dataKeyID: "data-2026")
        let path = directory.file("app.sqlite")
        func keys() throws -> KeyList {
            // A new KEK object each time: a new session on the token, the value unwrapped again.
            try KeyList(database: path, keys: [DatabaseKey(id: "data-2026", source: .wrapped(wrapped))],
                        keyEncryptionKeys: KeyEncryptionKeyList([try self.kek()]))
        }
        do {
            let database = try EncryptedDatabase(path: path, keys: try keys(), options: OpenOptions(createIfMissing: true))
            try database.write { db in
                try db.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT)")
                for index in 0..<50 { try db.execute("INSERT INTO notes(text) VALUES (?)", ["note \(index)"]) }
            }
        }
        let reopened = try EncryptedDatabase(path: path, keys: try keys())
        #expect(reopened.report.openedWithKeyID == "data-2026")
        #expect(try reopened.read { try $0.query("SELECT count(*) AS n FROM notes").first?.get("n", as: Int.self) } == 50)
        let hex = Self.bytes(dataKey).map { String(format: "%02x", $0) }.joined()
        #expect(try SQLCipherShell.opens(path, with: .hex(hex)))
    }

    @Test("each failure names the step and what to do, and never the PIN", arguments: FailureCase.allCases)
    func failures(_ failure: FailureCase) throws {
        _ = try SoftHSMToken.configuration()
        let pinFile = directory.file("pin")
        try (SoftHSMToken.pin + "\n").write(toFile: pinFile, atomically: false, encoding: .utf8)
        chmod(pinFile, failure == .pinFileReadableByOthers ? 0o644 : 0o600)
        var reference = SoftHSMToken.reference()
        var environment = self.environment
        let expected: PKCS11Problem
        switch failure {
        case .moduleMissing:
            reference.module = directory.file("libnothing.so")
            expected = .moduleMissing(module: reference.module, reason: "")
        case .notAModule:
            reference.module = try #require(["/usr/lib/x86_64-linux-gnu/libz.so.1", "/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/aarch64-linux-gnu/libz.so.1"].first { FileManager.default.fileExists(atPath: $0) })
            expected = .notAModule(module: reference.module)
        case .tokenMissing:
            reference.tokenLabel = "no-such-token"
            expected = .tokenNotFound(token: "\"no-such-token\"", module: reference.module, found: [])
        case .wrongPIN:
            reference.tokenLabel = SoftHSMToken.pinToken
            environment[SoftHSMToken.pinVariable] = SoftHSMToken.wrongPIN
            expected = .pinIncorrect(token: "\"\(SoftHSMToken.pinToken)\"")
        case .pinUnset:
            environment = [:]
            expected = .pinUnavailable(source: "environment variable \(SoftHSMToken.pinVariable)", reason: "it is not set; export it before running")
        case .pinFileReadableByOthers:
            reference.pin = .file(pinFile)
            expected = .pinUnavailable(source: "file \(pinFile)", reason: "group or others can read it (mode 644); run: chmod 600 \(pinFile)")
        case .keyMissing:
            reference.keyLabel = "no-such-key"
            expected = .keyNotFound(label: "no-such-key", token: "\"\(SoftHSMToken.mainToken)\"")
        case .notAnAESKey:
            reference.keyLabel = "generic"
            expected = .mechanismUnsupported(mechanism: "CKM_AES_GCM", token: "\"\(SoftHSMToken.mainToken)\"")
        }
        var thrown: (any Error)?
        do {
            let kek = try PKCS11KeyEncryptionKey(id: "hsm", reference: reference, environment: environment)
            _ = try kek.wrap(DataKey.random(), context: KeyWrappingContext(dataKeyID: "d", keyEncryptionKeyID: "hsm"))
        } catch {
            thrown = error
        }
        let problem = try #require(thrown as? KeyWrappingProblem, "\(failure) did not fail")
        guard case .pkcs11(let actual) = problem else { Issue.record("\(failure): \(problem)"); return }
        switch (actual, expected) {
        case let (.moduleMissing(module, reason), .moduleMissing(expectedModule, _)):
            #expect(module == expectedModule && !reason.isEmpty)
        case let (.tokenNotFound(token, module, found), .tokenNotFound(expectedToken, expectedModule, _)):
            #expect(token == expectedToken && module == expectedModule)
            #expect(found.contains(SoftHSMToken.mainToken) && found.contains(SoftHSMToken.pinToken))
            #expect(problem.description.contains("\"\(SoftHSMToken.mainToken)\""))
        default:
            #expect(actual == expected)
        }
        for secret in [SoftHSMToken.pin, SoftHSMToken.wrongPIN] {
            #expect(!problem.description.contains(secret) && !String(reflecting: problem).contains(secret))
        }
        // A PIN that works after the mistake is corrected: the failure left nothing behind.
        if failure == .pinFileReadableByOthers {
            chmod(pinFile, 0o600)
            #expect(throws: Never.self) { try PKCS11KeyEncryptionKey(id: "hsm", reference: reference, environment: [:]) }
        }
    }

    enum FailureCase: String, CaseIterable, Sendable, CustomStringConvertible {
        case moduleMissing, notAModule, tokenMissing, wrongPIN, pinUnset, pinFileReadableByOthers, keyMissing, notAnAESKey
        var description: String { rawValue }
    }

    @Test("a token found by its slot id (as softhsm2-util --show-slots lists it) wraps like by its label; an empty slot id is not found")
    func slotID() throws {
        _ = try SoftHSMToken.configuration()
        let tool = try #require(ProcessRunner.which("softhsm2-util"))
        let listing = try ProcessRunner.run(tool, ["--show-slots"], environment: try SoftHSMToken.childEnvironment()).stdout
        // "Slot <id>" lines, each followed by its token's "Label: <label>".
        var slot: UInt?
        var current: UInt?
        for line in listing.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if line.hasPrefix("Slot "), let id = UInt(line.dropFirst(5)) { current = id }
            if line.hasPrefix("Label:"), line.dropFirst(6).trimmingCharacters(in: .whitespaces) == SoftHSMToken.mainToken { slot = current }
        }
        var reference = SoftHSMToken.reference()
        reference.tokenLabel = nil
        let found: UInt = try #require(slot, "no slot for \(SoftHSMToken.mainToken) in: \(listing)")
        reference.slot = found
        let bySlot = try PKCS11KeyEncryptionKey(id: "hsm", reference: reference, environment: environment)
        let context = KeyWrappingContext(dataKeyID: "data-1", keyEncryptionKeyID: "hsm")
        let dataKey = DataKey.random()
        #expect(Self.bytes(try kek().unwrap(try bySlot.wrap(dataKey, context: context), context: context)) == Self.bytes(dataKey))
        reference.slot = 4_000_000_000
        #expect {
            try PKCS11KeyEncryptionKey(id: "hsm", reference: reference, environment: environment)
        } throws: { error in
            guard case .pkcs11(.tokenNotFound(let token, _, let found))? = error as? KeyWrappingProblem else { return false }
            return token == "in slot 4000000000" && found.contains(SoftHSMToken.mainToken)
        }
    }

    @Test("a locked PIN and every other problem tell what to do (SoftHSM2 never locks a PIN, so this is the text alone)")
    func descriptions() {
        #expect(PKCS11Problem.pinLocked(token: "\"app\"").description.contains("security officer must unlock it"))
        #expect(PKCS11Problem.failed(function: "C_Login", returnValue: 0x30).description == "C_Login failed: CKR_DEVICE_ERROR")
        #expect(PKCS11Problem.failed(function: "C_Login", returnValue: 0x12345).description == "C_Login failed: CKR 0x12345")
        #expect(KeyWrappingProblem.pkcs11(.keyNotFound(label: "k", token: "\"t\"")).description.contains("pkcs11-tool --keygen"))
    }
}
