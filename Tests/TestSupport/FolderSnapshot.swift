import Foundation

/// Every name in a folder and the bytes of each file, to prove that an operation left the folder
/// exactly as it found it (no side file made or removed, no byte changed).
public struct FolderSnapshot: Equatable, Sendable, CustomStringConvertible {
    /// The bytes of each file, by name (`nil` for a name in `ignoringBytesOf`, or what cannot be
    /// read as a file).
    public let files: [String: Data?]

    /// Takes a snapshot of `folder`; for the names in `ignoringBytesOf` (e.g. a WAL-mode file's
    /// `-shm`, the shared-memory index whose read marks every reader updates), only that they
    /// exist.
    public init(_ folder: String, ignoringBytesOf ignored: Set<String> = []) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        files = Dictionary(uniqueKeysWithValues: names.map { name in
            (name, ignored.contains(name) ? nil : TestFiles.contents(folder + "/" + name))
        })
    }

    /// The names, sorted.
    public var names: [String] { files.keys.sorted() }

    /// The names added, removed or with other bytes in `self` than in `earlier`, sorted.
    public func changes(since earlier: FolderSnapshot) -> [String] {
        Set(files.keys).union(earlier.files.keys).filter { files[$0] != earlier.files[$0] }.sorted()
    }

    /// `name (bytes)`, one per file.
    public var description: String {
        names.map { "\($0) (\(files[$0].flatMap { $0 }.map { "\($0.count) bytes" } ?? "bytes not compared"))" }.joined(separator: ", ")
    }
}
