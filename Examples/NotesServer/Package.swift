// swift-tools-version: 6.0
import PackageDescription

// An example HTTP service on EncryptedSQLite: its own package, so that the library's dependency graph
// never includes Hummingbird, SwiftNIO or swift-prometheus. It depends on the library by path.
let package = Package(
    name: "NotesServer",
    platforms: [.macOS(.v15)],
    dependencies: [
        // The library, by path: the repository root. (Named, since a path package is known by its folder name.)
        .package(name: "EncryptedSQLite", path: "../.."),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        // SwiftNIO, already in Hummingbird's graph: the request read timeout is a channel handler.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.34.1"),
        // The command line (serve, seed, --help); the same package the rekey command uses.
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    ],
    targets: [
        .executableTarget(
            name: "notes-server",
            dependencies: [
                .product(name: "EncryptedSQLite", package: "EncryptedSQLite"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/NotesServer"
        ),
        // Runs the built `notes-server` (a process, found beside the test binary: `swift test` builds
        // every target) on 127.0.0.1 over a real encrypted database, drives it with raw sockets
        // (malformed and half-sent requests) and stops it with SIGTERM.
        .testTarget(
            name: "NotesServerTests",
            path: "Tests/NotesServerTests"
        ),
    ],
    swiftLanguageModes: [.v6]
)
