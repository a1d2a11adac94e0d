import EncryptedSQLite
import Foundation
import Testing
import TestSupport

// The dimensions of the configuration matrix (ConfigurationMatrixTests): every user-visible
// operation on every file format, journal mode, reader setting and key kind the linked engine
// accepts. CI runs a pairwise covering set of the valid combinations; `MATRIX=full` runs them all.

/// The engine under test: 3 (Debian 12, SQLCipher 3.4.1) or 4 (SQLCipher 4.x).
let matrixEngineMajor = SQLCipherEngine.linked.major

/// The file format every key of the list describes (the legacy format: only the oldest key).
enum MatrixFormat: Int, CaseIterable, Sendable {
    /// The engine's own format: no `cipher:` settings.
    case engineDefault
    /// The other SQLCipher generation's format: on SQLCipher 4 a key pinned to SQLCipher 3
    /// (`cipher: sqlcipher3`); on SQLCipher 3.4.1 a key pinned to SQLCipher 4, which that engine refuses.
    case otherGeneration
    /// Custom KDF and page size: `kdf_iter 4000`, 2 KiB pages (the combination of issue 21).
    case kdfAndPageSize
    /// Larger pages than the engine's default, default KDF: 4 KiB on SQLCipher 3, 8 KiB on SQLCipher 4.
    case largePages
    /// A SQLCipher 2.x file (kdf_iter 4000, HMAC-SHA1) made by the `sqlcipher` shell, opened with a
    /// `legacy: true` key; the newer keys are in the engine's own format.
    case legacy

    var name: String {
        switch self {
        case .engineDefault: "default format"
        case .otherGeneration: matrixEngineMajor >= 4 ? "3.x format (cipher sqlcipher3)" : "4.x format (cipher sqlcipher4)"
        case .kdfAndPageSize: "kdf_iter 4000 + 2 KiB pages"
        case .largePages: "\(largePageSize / 1024) KiB pages"
        case .legacy: "legacy 2.x file"
        }
    }

    /// The engine's default page size.
    static var enginePageSize: Int { matrixEngineMajor >= 4 ? 4096 : 1024 }
    private var largePageSize: Int { matrixEngineMajor >= 4 ? 8192 : 4096 }

    /// The settings of the list's keys (for `legacy`, of the keys after the legacy one).
    var settings: CipherSettings {
        switch self {
        case .engineDefault, .legacy: .engineDefault
        case .otherGeneration: CipherSettings(generation: matrixEngineMajor >= 4 ? .sqlcipher3 : .sqlcipher4)
        case .kdfAndPageSize: CipherSettings(kdfIterations: 4000, pageSize: 2048)
        case .largePages: CipherSettings(pageSize: largePageSize)
        }
    }

    /// The page size files in ``settings`` have (written down here, not derived from the library).
    var pageSize: Int {
        switch self {
        case .engineDefault, .legacy: Self.enginePageSize
        case .otherGeneration: matrixEngineMajor >= 4 ? 1024 : 4096
        case .kdfAndPageSize: 2048
        case .largePages: largePageSize
        }
    }

    /// The format a settings rotation (export) moves the file to: away from the engine's default,
    /// or back to it (on SQLCipher 4 a 3.x file is upgraded to 4.x, as the guides describe).
    var exportTarget: MatrixFormat {
        switch self {
        case .engineDefault, .legacy: .kdfAndPageSize
        case .otherGeneration, .kdfAndPageSize, .largePages: .engineDefault
        }
    }

    /// Why the linked engine refuses the format, or `nil`.
    var refusal: String? {
        self == .otherGeneration && matrixEngineMajor < 4 ? "SQLCipher 3.4.1 cannot read or write SQLCipher 4's format" : nil
    }
}

enum MatrixJournal: Int, CaseIterable, Sendable {
    case rollback, wal
    var name: String { self == .wal ? "WAL" : "rollback journal" }
}

enum MatrixReaders: Int, CaseIterable, Sendable {
    case none, pool
    var name: String { self == .pool ? "reader pool" : "no pool" }
    /// `OpenOptions.concurrentReaders`.
    var count: Int { self == .pool ? 3 : 0 }
}

enum MatrixKeyKind: Int, CaseIterable, Sendable {
    case passphrase, hex, keyFile, environment
    var name: String {
        switch self {
        case .passphrase: "passphrase"
        case .hex: "raw hex key"
        case .keyFile: "key file (passphrase)"
        case .environment: "environment variable (hex)"
        }
    }

    var sourceKind: SourceKind {
        switch self {
        case .passphrase: .passphrase
        case .hex: .hex
        case .keyFile: .filePassphrase
        case .environment: .envHex
        }
    }
}

/// One combination of the matrix.
struct MatrixCombination: Sendable, Hashable, CustomTestStringConvertible, CustomStringConvertible {
    let format: MatrixFormat
    let journal: MatrixJournal
    let readers: MatrixReaders
    let keyKind: MatrixKeyKind

    init(format: MatrixFormat, journal: MatrixJournal, readers: MatrixReaders, keyKind: MatrixKeyKind) {
        (self.format, self.journal, self.readers, self.keyKind) = (format, journal, readers, keyKind)
    }

    /// The combination a row of value indices names (dimension order: format, journal, readers, key kind).
    init(row: [Int]) {
        self.init(format: MatrixFormat(rawValue: row[0])!, journal: MatrixJournal(rawValue: row[1])!,
                  readers: MatrixReaders(rawValue: row[2])!, keyKind: MatrixKeyKind(rawValue: row[3])!)
    }

    var row: [Int] { [format.rawValue, journal.rawValue, readers.rawValue, keyKind.rawValue] }

    var description: String { "\(format.name) · \(journal.name) · \(readers.name) · \(keyKind.name)" }
    var testDescription: String { description }

    /// Why the linked engine refuses the combination, or `nil` when every operation must work.
    var refusal: String? { format.refusal }

    /// The journal mode the file must be in once the library opened it: a reader pool switches a
    /// rollback-journal file to WAL (`OpenOptions.concurrentReaders`, documented), it does not refuse it.
    var expectedJournalMode: String { journal == .wal || readers == .pool ? "wal" : "delete" }
}

/// Which combinations run: `MATRIX=full` runs the full product, anything else the pairwise set.
enum ConfigurationMatrix {
    static let counts = [MatrixFormat.allCases.count, MatrixJournal.allCases.count, MatrixReaders.allCases.count, MatrixKeyKind.allCases.count]

    static var isFull: Bool { ProcessInfo.processInfo.environment["MATRIX"] == "full" }

    /// The full product, in order.
    static let all: [MatrixCombination] = Pairwise.product(counts).map(MatrixCombination.init(row:))

    /// Every combination the linked engine accepts.
    static let valid: [MatrixCombination] = all.filter { $0.refusal == nil }

    /// Every combination the linked engine refuses.
    static let refused: [MatrixCombination] = all.filter { $0.refusal != nil }

    /// The pairwise covering set of the valid combinations.
    static let pairwise: [MatrixCombination] = Pairwise.covering(valid.map(\.row)).map(MatrixCombination.init(row:))

    /// The combinations whose operations run in this test run.
    static var selected: [MatrixCombination] { isFull ? valid : pairwise }

    /// The refused combinations checked in this test run: their own pairwise set, or all with `MATRIX=full`.
    static var selectedRefused: [MatrixCombination] { isFull ? refused : Pairwise.covering(refused.map(\.row)).map(MatrixCombination.init(row:)) }
}
