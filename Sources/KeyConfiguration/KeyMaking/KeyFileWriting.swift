import CipherFormats
import DurableFiles
import Foundation

// The file steps shared by making keys and rotating master keys: new key files, which never
// replace a file, and the durable replacement of an edited Keys file.

extension GeneratedKey {
    /// `keyFile` from the working directory, or `<id>.key` in `keysFolder`.
    /// - Throws: ``KeyMakingError/keyFileNameNeeded(keyID:)`` when `id` is not a plain file name.
    static func keyFilePath(_ keyFile: String?, id: String, keysFolder: String) throws(KeyMakingError) -> String {
        if let keyFile { return KeysFile.absolute(keyFile, base: FileManager.default.currentDirectoryPath) }
        guard id.unicodeScalars.allSatisfy({ $0 == "-" || $0 == "_" || $0 == "." || ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) }),
              !id.hasPrefix(".")
        else { throw .keyFileNameNeeded(keyID: id) }
        return keysFolder + "/" + id + ".key"
    }

    /// Writes `content` to the NEW file `path` (created exclusively under a temporary name with
    /// mode 0600, flushed, linked into place without ever replacing a file, folder flushed).
    /// - Throws: ``KeyMakingError/keyFileExists(path:)`` or ``KeyMakingError/keyFileNotWritten(path:reason:)``.
    static func writeNewKeyFile(_ path: String, content: SecretBytes, files: FileOperations = .system) throws(KeyMakingError) {
        let failure = content.withUnsafeBytes { bytes -> PublishFailure? in
            do throws(PublishFailure) {
                try files.writeWholeFile(bytes, as: path, mode: 0o600, ownerOf: nil, replacing: false)
                return nil
            } catch {
                return error
            }
        }
        switch failure {
        case nil: return
        case .targetExists?: throw .keyFileExists(path: path)
        case let failure? where failure.isFolderNotSynced: return
        case let failure?: throw .keyFileNotWritten(path: path, reason: failure.description)
        }
    }

    /// Replaces the Keys file with `text` durably (temporary, flush, rename, folder flush),
    /// keeping its mode and owner.
    /// - Throws: ``KeyMakingError/keysFileNotWritten(keysFile:reason:)``; the file is then unchanged.
    static func replaceKeysFile(_ keysFile: String, with text: String, files: FileOperations = .system) throws(KeyMakingError) {
        let mode = FileSystem.permissions(of: keysFile) ?? FileSystem.newFileMode
        let failure = Array(text.utf8).withUnsafeBytes { bytes -> PublishFailure? in
            do throws(PublishFailure) {
                try files.writeWholeFile(bytes, as: keysFile, mode: mode, ownerOf: keysFile, replacing: true)
                return nil
            } catch {
                return error
            }
        }
        if let failure, !failure.isFolderNotSynced {
            throw .keysFileNotWritten(keysFile: keysFile, reason: failure.description)
        }
    }
}
