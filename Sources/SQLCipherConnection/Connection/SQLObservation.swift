#if DEBUG
import CSQLCipher
import Foundation

/// Test-only observation of the SQL that reaches SQLite, compiled into debug builds only: the
/// secrets tests use it to prove that no key material is ever SQL text.
///
/// An observer names a folder; connections opened afterwards on a file in that folder report
/// - every SQL text the library prepares (``Connection/prepare(_:)``, ``Connection/execute(_:_:)``,
///   `ATTACH` in the export path), on every connection;
/// - when `trace` is set, every statement SQLite runs, as `sqlite3_trace_v2(SQLITE_TRACE_STMT)`
///   reports it (the SQL text, trigger programs included) and as `sqlite3_expanded_sql` renders it
///   with its bound values.
///
/// Never set `trace` for work that goes through the export path: SQLCipher 3.4.1's
/// `sqlcipher_export` crashes (SIGSEGV) on a connection with any trace hook, `sqlite3_trace_v2`
/// included, whatever its mask.
package final class SQLObservation: @unchecked Sendable {
    /// One piece of SQL seen on a connection to `path`.
    package enum Event: Sendable, Equatable {
        /// Text the library handed to `sqlite3_prepare_v2`.
        case prepared(String)
        /// A statement SQLite started: its text, and the text with bound values filled in.
        case traced(sql: String, expanded: String)
    }

    struct Observer: Sendable {
        let folder: String
        let trace: Bool
        let record: @Sendable (_ path: String, _ event: Event) -> Void
    }

    /// The one registry connections consult when they open.
    package static let shared = SQLObservation()

    private let lock = NSLock()
    // Invariant: only touched with `lock` held.
    private var observers: [UUID: Observer] = [:]

    /// Reports SQL of connections opened on files in `folder` (not in its subfolders' names
    /// only: any path starting with `folder + "/"`) until ``stop(_:)``.
    package func observe(folder: String, trace: Bool, record: @escaping @Sendable (_ path: String, _ event: Event) -> Void) -> UUID {
        let token = UUID()
        let folder = folder.hasSuffix("/") ? folder : folder + "/"
        lock.withLock { observers[token] = Observer(folder: folder, trace: trace, record: record) }
        return token
    }

    /// Stops the observer `token` stands for (connections already open keep reporting to it).
    package func stop(_ token: UUID) {
        lock.withLock { observers[token] = nil }
    }

    /// What a connection keeps while it is observed: the observers that matched its path when it
    /// opened. `nil` when none did (the usual case: nothing is installed).
    final class Attachment: @unchecked Sendable {
        let path: String
        let observers: [Observer]

        init(path: String, observers: [Observer]) {
            self.path = path
            self.observers = observers
        }

        package func record(_ event: Event) {
            for observer in observers { observer.record(path, event) }
        }
    }

    /// The attachment for a connection just opened on `path`, with the trace hook installed on
    /// `handle` when an observer asks for it.
    func attach(handle: OpaquePointer, path: String) -> Attachment? {
        let matching = lock.withLock { observers.values.filter { path.hasPrefix($0.folder) } }
        guard !matching.isEmpty else { return nil }
        let attachment = Attachment(path: path, observers: matching)
        if matching.contains(where: \.trace) {
            // The connection keeps the attachment alive for as long as the handle is open.
            sqlite3_trace_v2(handle, UInt32(SQLITE_TRACE_STMT), traceStatement, Unmanaged.passUnretained(attachment).toOpaque())
        }
        return attachment
    }
}

/// `sqlite3_trace_v2` callback: reports each statement's text and its expanded form.
private func traceStatement(_ type: UInt32, _ context: UnsafeMutableRawPointer?, _ statement: UnsafeMutableRawPointer?, _ text: UnsafeMutableRawPointer?) -> Int32 {
    guard type == UInt32(SQLITE_TRACE_STMT), let context, let statement else { return 0 }
    let attachment = Unmanaged<SQLObservation.Attachment>.fromOpaque(context).takeUnretainedValue()
    let sql = text.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? ""
    var expanded = ""
    if let rendered = sqlite3_expanded_sql(OpaquePointer(statement)) {
        expanded = String(cString: rendered)
        sqlite3_free(rendered)
    }
    attachment.record(.traced(sql: sql, expanded: expanded))
    return 0
}
#endif
