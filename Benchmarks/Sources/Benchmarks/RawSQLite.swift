import CSQLCipher
import Foundation

/// SQLite's "copy this buffer now" destructor (the C macro `SQLITE_TRANSIENT`).
let rawTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// The raw C baseline: the SQLCipher C API called directly, as a C program would, with no checks
/// beyond result codes. This is the only place outside the library that talks to SQLite.
final class RawConnection {
    let handle: OpaquePointer

    /// Opens `path` and keys it with `key`, the exact text given to `sqlite3_key` (a passphrase, or
    /// `x'<64 hex>'` for a raw key). Nothing is read: a wrong key shows at the first read.
    init(path: String, key: String, readOnly: Bool = false, create: Bool = false) throws {
        var flags = SQLITE_OPEN_NOMUTEX | (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE)
        if create { flags |= SQLITE_OPEN_CREATE }
        var opened: OpaquePointer?
        let code = sqlite3_open_v2(path, &opened, flags, nil)
        guard code == SQLITE_OK, let opened else {
            sqlite3_close_v2(opened)
            throw RawError(code: code, message: "open \(path)")
        }
        handle = opened
        let keyCode = key.withCString { sqlite3_key(handle, $0, Int32(strlen($0))) }
        guard keyCode == SQLITE_OK else { throw RawError(code: keyCode, message: "sqlite3_key") }
        sqlite3_busy_timeout(handle, 5000)
    }

    deinit { sqlite3_close_v2(handle) }

    /// Runs SQL text with `sqlite3_exec`.
    func exec(_ sql: String) throws {
        let code = sqlite3_exec(handle, sql, nil, nil, nil)
        guard code == SQLITE_OK else { throw error(code, sql) }
    }

    /// Reads the schema: what proves the key.
    func verifyReadable() throws { try exec("SELECT count(*) FROM sqlite_master") }

    func prepare(_ sql: String) throws -> OpaquePointer {
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard code == SQLITE_OK, let statement else { throw error(code, sql) }
        return statement
    }

    /// The first column of the first row as an integer.
    func integer(_ sql: String) throws -> Int64 {
        let statement = try prepare(sql)
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW else { throw error(sqlite3_errcode(handle), sql) }
        return sqlite3_column_int64(statement, 0)
    }

    func error(_ code: Int32, _ sql: String) -> RawError {
        RawError(code: code, message: String(cString: sqlite3_errmsg(handle)) + " — in: " + sql)
    }
}

struct RawError: Error, CustomStringConvertible {
    let code: Int32
    let message: String
    var description: String { "SQLite error \(code): \(message)" }
}

/// Binds a Swift string as text, copied by SQLite (`SQLITE_TRANSIENT`): for statements that step
/// after the string's bytes are gone.
func rawBindText(_ statement: OpaquePointer, _ index: Int32, _ text: String) {
    var text = text
    text.withUTF8 { buffer in
        _ = buffer.withMemoryRebound(to: CChar.self) {
            sqlite3_bind_text(statement, index, $0.baseAddress, Int32($0.count), rawTransient)
        }
    }
}

/// Binds a Swift string as text in place (`SQLITE_STATIC`: SQLite reads the caller's bytes, as a
/// C program binds a buffer that outlives the step) and steps the statement while the bytes live.
func rawBindTextAndStep(_ statement: OpaquePointer, _ index: Int32, _ text: String) -> Int32 {
    var text = text
    return text.withUTF8 { buffer in
        buffer.withMemoryRebound(to: CChar.self) {
            sqlite3_bind_text(statement, index, $0.baseAddress, Int32($0.count), nil)
            return sqlite3_step(statement)
        }
    }
}

/// Reads a text column as a Swift string (length from `sqlite3_column_bytes`, no `strlen`).
func rawColumnText(_ statement: OpaquePointer, _ index: Int32) -> String {
    guard let text = sqlite3_column_text(statement, index) else { return "" }
    return String(decoding: UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(statement, index))), as: UTF8.self)
}

/// Random key material for one benchmark run: 32 bytes as 64 hex digits. Never printed.
func randomHexKey() -> String {
    var generator = SystemRandomNumberGenerator()
    return (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
}

/// A random passphrase for one benchmark run. Never printed.
func randomPassphrase() -> String { "benchmark passphrase " + UUID().uuidString }

/// Peak and current resident set size of this process, in kB, from /proc/self/status.
func memoryStatus() -> (peakKB: Int, currentKB: Int) {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return (0, 0) }
    func field(_ name: String) -> Int {
        for line in text.split(separator: "\n") where line.hasPrefix(name + ":") {
            return Int(line.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "") ?? 0
        }
        return 0
    }
    return (field("VmHWM"), field("VmRSS"))
}
