import Foundation

/// The exact bytes of a file and the names beside it, to prove that a failed operation changed
/// nothing on disk and left no side files.
public struct FileSnapshot: Equatable, Sendable {
    /// The file's bytes (`nil` when it did not exist).
    public let bytes: Data?
    /// The names in the file's folder.
    public let folderListing: [String]

    /// Takes a snapshot of `path` and its folder.
    public init(_ path: String) {
        bytes = TestFiles.contents(path)
        let folder = (path as NSString).deletingLastPathComponent
        folderListing = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).sorted()
    }
}
