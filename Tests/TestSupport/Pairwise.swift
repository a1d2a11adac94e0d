/// A small, deterministic all-pairs (pairwise) generator for test matrices.
///
/// A combination is a row of value indices, one per dimension (`[2, 0, 1, 3]`: the third value of
/// the first dimension, the first of the second, …). ``covering(_:)`` picks, from the candidate
/// rows given (usually every valid row of the full product), rows until every pair of values of
/// two dimensions that some candidate holds is held by a picked row: greedily, each step taking
/// the candidate that holds the most pairs not held yet, the earliest one on ties. The same
/// candidates always give the same rows, so a CI run and a local run test the same combinations.
public enum Pairwise {
    /// A value of one dimension together with a value of a later dimension.
    public struct Pair: Hashable, Sendable, CustomStringConvertible {
        public let dimension: Int, value: Int, otherDimension: Int, otherValue: Int
        public var description: String { "d\(dimension)=\(value) & d\(otherDimension)=\(otherValue)" }
    }

    /// Every row of the full product of dimensions with `counts[i]` values each, in lexicographic order.
    public static func product(_ counts: [Int]) -> [[Int]] {
        counts.reduce([[]]) { rows, count in rows.flatMap { row in (0..<count).map { row + [$0] } } }
    }

    /// The pairs one row holds.
    public static func pairs(of row: [Int]) -> Set<Pair> {
        var pairs = Set<Pair>()
        for first in row.indices {
            for second in row.indices where second > first {
                pairs.insert(Pair(dimension: first, value: row[first], otherDimension: second, otherValue: row[second]))
            }
        }
        return pairs
    }

    /// Rows of `candidates` that together hold every pair any candidate holds (see the type).
    public static func covering(_ candidates: [[Int]]) -> [[Int]] {
        var uncovered = candidates.reduce(into: Set<Pair>()) { $0.formUnion(pairs(of: $1)) }
        var remaining = candidates
        var chosen: [[Int]] = []
        while !uncovered.isEmpty {
            var best = 0
            var bestGain = -1
            for (index, row) in remaining.enumerated() {
                let gain = pairs(of: row).intersection(uncovered).count
                if gain > bestGain { (best, bestGain) = (index, gain) }
            }
            let row = remaining.remove(at: best)
            chosen.append(row)
            uncovered.subtract(pairs(of: row))
        }
        return chosen
    }
}
