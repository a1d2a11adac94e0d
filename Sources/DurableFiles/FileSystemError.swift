import Foundation

/// A failed system call, with the operation and `errno`.
package struct FileSystemError: Error, CustomStringConvertible {
    package let operation: String
    package let code: Int32

    package static func failed(operation: String, errno code: Int32) -> FileSystemError {
        FileSystemError(operation: operation, code: code)
    }

    package var description: String { "\(operation): \(String(cString: strerror(code)))" }
}
