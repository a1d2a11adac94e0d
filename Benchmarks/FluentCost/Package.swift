// swift-tools-version: 6.0
// Issue 33's cost through Fluent: the same Fluent workload on fluent-sqlite-driver over plain
// SQLite (sqlite-nio's own SQLite) and on this repository's driver over SQLCipher. Two
// executables, so that one process never links both SQLites (they export the same sqlite3_*
// symbols); the workload, its models and its timing are one shared target.
//   scripts/fluent-cost.sh      (release builds, alternating runs, the table and a perf breakdown)
import PackageDescription

let package = Package(
    name: "FluentCost",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(name: "FluentEncryptedSQLite", path: "../../Integrations/FluentEncryptedSQLite"),
        .package(url: "https://github.com/vapor/fluent-sqlite-driver", from: "4.9.0"),
        .package(url: "https://github.com/vapor/fluent-kit", from: "1.57.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    ],
    targets: [
        // The models, migrations and timed phases both executables run.
        .target(
            name: "FluentWorkload",
            dependencies: [
                .product(name: "FluentKit", package: "fluent-kit"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .executableTarget(
            name: "fluent-cost-plain",
            dependencies: ["FluentWorkload", .product(name: "FluentSQLiteDriver", package: "fluent-sqlite-driver")]
        ),
        .executableTarget(
            name: "fluent-cost-encrypted",
            dependencies: ["FluentWorkload", .product(name: "FluentEncryptedSQLiteDriver", package: "FluentEncryptedSQLite")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
