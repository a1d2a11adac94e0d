import Foundation
import Yams

// Translates what decoding a Keys file throws into KeyConfigurationError. The messages never
// quote the YAML text, which may hold secrets.

extension KeysFile {
    /// The ``KeyConfigurationError`` for an error thrown while decoding the Keys file at `path`.
    static func configurationError(decoding error: any Error, path: String) -> KeyConfigurationError {
        switch error {
        case let error as KeyConfigurationError:
            return error.locatedIn(path)
        case let error as YamlError:
            return .keysFileInvalid(path: path, location: location(of: error), problem: problem(of: error))
        case let error as DecodingError:
            return configurationError(from: error, path: path)
        default:
            return .keysFileInvalid(path: path, location: "the file", problem: "it could not be decoded")
        }
    }

    /// Where in the file a decoding error happened, such as `databases[0].keys[1]`, or
    /// `the top level`.
    static func location(of codingPath: [any CodingKey]) -> String {
        var text = ""
        for key in codingPath {
            if let index = key.intValue { text += "[\(index)]" } else { text += text.isEmpty ? key.stringValue : ".\(key.stringValue)" }
        }
        return text.isEmpty ? "the top level" : text
    }

    /// Where a YAML syntax error is: a line and column, a byte offset, or the whole file.
    static func location(of error: YamlError) -> String {
        switch error {
        case let .scanner(_, _, mark, _), let .parser(_, _, mark, _), let .composer(_, _, mark, _):
            return "line \(mark.line), column \(mark.column)"
        case let .duplicatedKeysInMapping(_, context):
            return "line \(context.mark.line), column \(context.mark.column)"
        case let .reader(_, offset, _, _):
            return offset.map { "byte \($0)" } ?? "the file"
        default:
            return "the file"
        }
    }

    /// What is wrong with the YAML, in the parser's words (which name no content).
    static func problem(of error: YamlError) -> String {
        switch error {
        case let .scanner(_, problem, _, _), let .parser(_, problem, _, _), let .composer(_, problem, _, _):
            return "not valid YAML (\(problem))"
        case let .duplicatedKeysInMapping(duplicates, _):
            // Only names that look like field names: a value in the place of a name may be a key.
            let shown = duplicates.map { KeyConfigurationError.shownFieldName($0) }
            return "a field appears twice (\(shown.joined(separator: ", "))); keep one"
        case let .reader(problem, _, _, _):
            return "not readable as YAML (\(problem))"
        default:
            return "not valid YAML"
        }
    }

    /// The error for a document that is valid YAML but not of the Keys file's shape.
    private static func configurationError(from error: DecodingError, path: String) -> KeyConfigurationError {
        switch error {
        case let .keyNotFound(key, context):
            return .keysFileInvalid(path: path, location: location(of: context.codingPath), problem: "the field \"\(key.stringValue)\" is missing")
        case let .typeMismatch(type, context):
            return .keysFileInvalid(path: path, location: location(of: context.codingPath), problem: "expected \(describe(type))")
        case let .valueNotFound(type, context):
            return .keysFileInvalid(path: path, location: location(of: context.codingPath), problem: "expected \(describe(type)), found nothing")
        case let .dataCorrupted(context):
            if let own = context.underlyingError as? KeyConfigurationError {
                return own.locatedIn(path)
            }
            if let yaml = context.underlyingError as? YamlError {
                return .keysFileInvalid(path: path, location: location(of: yaml), problem: problem(of: yaml))
            }
            let location = location(of: context.codingPath)
            if context.codingPath.last?.stringValue == "format" {
                return .keysFileInvalid(path: path, location: location, problem: "format must be one of: \(KeyFormat.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            return .keysFileInvalid(path: path, location: location, problem: "the value is not valid here")
        @unknown default:
            return .keysFileInvalid(path: path, location: "the file", problem: "it could not be decoded")
        }
    }

    /// The kind of value the file should have had, in a user's words.
    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "text"
        case is [DatabaseDocument].Type, is [KeyDocument].Type: return "a list"
        default: return "a mapping with the documented fields"
        }
    }
}

extension KeyConfigurationError {
    /// Puts the Keys file's path into errors raised while decoding, which do not know it.
    func locatedIn(_ path: String) -> KeyConfigurationError {
        switch self {
        case let .unknownField(_, location, field, allowed):
            return .unknownField(path: path, location: location, field: field, allowed: allowed)
        case let .keysFileInvalid(_, location, problem):
            return .keysFileInvalid(path: path, location: location, problem: problem)
        default:
            return self
        }
    }
}
