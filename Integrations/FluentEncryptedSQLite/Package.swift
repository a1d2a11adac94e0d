// swift-tools-version: 6.0
import PackageDescription

// A FluentKit driver and an SQLKit database over EncryptedSQLite: its own package, so that the
// library's dependency graph never includes SwiftNIO, SQLKit or FluentKit. It depends on the library
// by path and on fluent-kit and sql-kit only (never sqlite-kit or sqlite-nio, which vendor a second
// SQLite that must not be linked beside libsqlcipher).
let package = Package(
    name: "FluentEncryptedSQLite",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "FluentEncryptedSQLiteDriver", targets: ["FluentEncryptedSQLiteDriver"]),
    ],
    dependencies: [
        .package(name: "EncryptedSQLite", path: "../.."),
        .package(url: "https://github.com/vapor/fluent-kit", from: "1.57.0"),
        .package(url: "https://github.com/vapor/sql-kit", from: "3.36.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // Tests only: shutdown under a ServiceGroup (LifecycleTests).
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        .target(
            name: "FluentEncryptedSQLiteDriver",
            dependencies: [
                .product(name: "EncryptedSQLite", package: "EncryptedSQLite"),
                .product(name: "FluentKit", package: "fluent-kit"),
                .product(name: "FluentSQL", package: "fluent-kit"),
                .product(name: "SQLKit", package: "sql-kit"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "FluentEncryptedSQLiteDriverTests",
            dependencies: [
                "FluentEncryptedSQLiteDriver",
                .product(name: "FluentBenchmark", package: "fluent-kit"),
                .product(name: "SQLKitBenchmark", package: "sql-kit"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
