// swift-tools-version: 6.0
import PackageDescription

// An example Vapor app on an encrypted SQLite database through the Fluent driver of this repository:
// its own package, so that neither the library nor the driver depends on Vapor. Both come by path.
let package = Package(
    name: "VaporTodos",
    platforms: [.macOS(.v15)],
    dependencies: [
        // The library and the driver, by path (named: a path package is known by its folder's name).
        .package(name: "EncryptedSQLite", path: "../.."),
        .package(path: "../../Integrations/FluentEncryptedSQLite"),
        .package(url: "https://github.com/vapor/vapor", from: "4.122.3"),
        .package(url: "https://github.com/vapor/fluent", from: "4.13.0"),
    ],
    targets: [
        .executableTarget(
            name: "vapor-todos",
            dependencies: [
                .product(name: "EncryptedSQLite", package: "EncryptedSQLite"),
                .product(name: "FluentEncryptedSQLiteDriver", package: "FluentEncryptedSQLite"),
                .product(name: "Vapor", package: "vapor"),
                .product(name: "Fluent", package: "fluent"),
            ],
            path: "Sources/VaporTodos"
        ),
    ],
    swiftLanguageModes: [.v6]
)
