import Foundation
import Yams

// Translates what reading a Keys file's YAML throws into KeyConfigurationError. The messages never
// quote the YAML text, which may hold secrets.

extension KeysFile {
    /// The ``KeyConfigurationError`` for an error thrown while decoding the Keys file at `path`.
    static func configurationError(decoding error: any Error, path: String) -> KeyConfigurationError {
        switch error {
        case let error as KeyConfigurationError:
            return error.locatedIn(path)
        case let error as YamlError:
            return .keysFileInvalid(path: path, location: location(of: error), problem: problem(of: error))
        default:
            return .keysFileInvalid(path: path, location: "the file", problem: "it could not be decoded")
        }
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
