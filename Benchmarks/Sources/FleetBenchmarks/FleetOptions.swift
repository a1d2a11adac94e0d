import Foundation

/// The fleet benchmark's settings, from the command line. Every count can be lowered for a quick run.
struct FleetOptions {
    /// Small databases whose data keys a master-key rotation rewraps (part a).
    var databases = 10_000
    /// How many of them the fleet re-encryption rotates to a new data key (part a); fewer than
    /// `databases` gives a per-database time and a linear estimate for all, labelled as such.
    var reencrypt: Int?
    /// Workers of the fleet re-encryption (`rekey --all --jobs`).
    var jobs = 2
    /// Databases opened in one process with wrapped data keys and with passphrases (part b).
    var opens = 1_000
    /// How many of the passphrase opens are measured (part b); fewer than `opens` gives a linear
    /// estimate for `opens`, labelled as such.
    var passphraseOpens: Int?
    /// Opens through the SoftHSM2 token (part c); 0 skips it.
    var tokenOpens = 200
    /// Parts to run: rewrap, open, token, keys (all but keys when empty; keys is rewrap's Keys-file
    /// side alone, with no database made).
    var only: Set<String> = []
    /// Where the JSON results go.
    var jsonPath = ".build/benchmarks/fleet-results.json"

    var reencryptCount: Int { min(reencrypt ?? databases, databases) }
    var passphraseOpenCount: Int { min(passphraseOpens ?? opens, opens) }
    func runs(_ part: String) -> Bool { only.isEmpty ? part != "keys" : only.contains(part) }

    static let usage = """
        usage: encryptedsqlite-fleet-benchmarks [options]
          --databases N         databases of the master-key rotation (default 10000)
          --reencrypt N         of those, how many the fleet re-encryption rotates (default: all)
          --jobs N              fleet re-encryption workers (default 2)
          --opens N             databases opened per key kind (default 1000)
          --passphrase-opens N  of those, how many passphrase opens are measured (default: all)
          --token-opens N       opens through the SoftHSM2 token, 0 skips (default 200)
          --only LIST           comma-separated parts: rewrap, open, token (default: all), or keys
                                (rewrap's Keys-file load and rotations alone, no database made)
          --json PATH           results file (default .build/benchmarks/fleet-results.json)
        """

    struct UsageError: Error, CustomStringConvertible {
        let description: String
    }

    static func parse(_ arguments: [String]) throws -> FleetOptions {
        var options = FleetOptions()
        var remaining = arguments[...]
        func value(_ name: String) throws -> String {
            guard let next = remaining.popFirst() else { throw UsageError(description: "\(name) needs a value") }
            return next
        }
        func count(_ name: String, minimum: Int = 1) throws -> Int {
            let text = try value(name)
            guard let number = Int(text), number >= minimum else { throw UsageError(description: "\(name): \(text) is not a count ≥ \(minimum)") }
            return number
        }
        while let argument = remaining.popFirst() {
            switch argument {
            case "--databases": options.databases = try count(argument)
            case "--reencrypt": options.reencrypt = try count(argument)
            case "--jobs": options.jobs = try count(argument)
            case "--opens": options.opens = try count(argument)
            case "--passphrase-opens": options.passphraseOpens = try count(argument)
            case "--token-opens": options.tokenOpens = try count(argument, minimum: 0)
            case "--only":
                options.only = Set(try value(argument).split(separator: ",").map(String.init))
                let unknown = options.only.subtracting(["rewrap", "open", "token", "keys"])
                guard unknown.isEmpty else { throw UsageError(description: "--only: unknown part \(unknown.sorted().joined(separator: ", "))") }
            case "--json": options.jsonPath = try value(argument)
            case "--help", "-h": throw UsageError(description: "")
            default: throw UsageError(description: "unknown option \(argument)")
            }
        }
        return options
    }

    var settings: [String: String] {
        ["databases": "\(databases)", "reencrypt": "\(reencryptCount)", "jobs": "\(jobs)", "opens": "\(opens)",
         "passphraseOpens": "\(passphraseOpenCount)", "tokenOpens": "\(tokenOpens)"]
    }
}
