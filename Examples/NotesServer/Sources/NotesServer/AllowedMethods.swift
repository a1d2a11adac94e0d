import Hummingbird

/// The methods each of the API's paths answers, so that another method on a known path gets 405
/// with an `Allow` header (Hummingbird's router answers 404 for it, as for an unknown path).
///
/// A pattern's components are literal, or `:name` for any one component, as in the router.
struct AllowedMethods: Sendable {
    private let routes: [(pattern: [Substring], methods: [HTTPRequest.Method])]

    init(_ routes: KeyValuePairs<String, [HTTPRequest.Method]>) {
        self.routes = routes.map { (pattern: $0.key.split(separator: "/"), methods: $0.value) }
    }

    /// The methods `path` answers; empty when no route has it.
    func methods(for path: String) -> [HTTPRequest.Method] {
        let components = path.split(separator: "/")
        return routes.first { route in
            route.pattern.count == components.count
                && zip(route.pattern, components).allSatisfy { pattern, component in pattern.hasPrefix(":") || pattern == component }
        }?.methods ?? []
    }
}
