// swift-tools-version: 6.1
// GRDB 7.10 beside raw C on the SQLite GRDB links (the system libsqlite3), for issue 24's peer
// rows. A package of its own, so that GRDB never enters EncryptedSQLite's dependency graph (and
// libsqlite3 never shares a process with libsqlcipher: both export the same sqlite3_* symbols).
//   swift run -c release grdb-peer --help      (or scripts/bench.sh --grdb-peer)
import PackageDescription

let package = Package(
    name: "GRDBPeer",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
    ],
    targets: [
        .executableTarget(
            name: "grdb-peer",
            dependencies: [
                .product(name: "GRDB", package: "GRDB.swift"),
                // The C API of the same libsqlite3, for the raw baselines.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
